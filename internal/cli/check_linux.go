package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// backendNames are the backends this build can run, for `confine version`.
func backendNames() []string {
	return []string{confine.BackendNamespaces, confine.Backend, confine.BackendBubblewrap}
}

func newCheck(stdout io.Writer) *cobra.Command {
	var asJSON, verbose bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report what this host can enforce, guarantee by guarantee",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			h := probeHost()
			runAsRoot := h.EUID == 0
			if runAsRoot {
				if wd, err := os.Getwd(); err == nil {
					var st syscall.Stat_t
					if syscall.Stat(wd, &st) == nil {
						runAsRoot = st.Uid == 0
					}
				}
			}
			maxProcs := spec.Limits{}.WithDefaults().MaxProcs
			gitDir := workTreeHasGit()
			decide := func(p provider.Provider) []ledger.Decision {
				f := provider.Facts(h, p, runAsRoot, maxProcs)
				f.GitDir = gitDir
				return ledger.Decide(p.Ledger(), f)
			}
			sel, selErr := provider.Select(h, provider.Request{Tier: policy.TierSandboxed,
				Enforce: func(p provider.Provider) error { _, err := ledger.Resolve(decide(p), nil); return err }})
			var backend string
			var layers []string
			var as []ledger.Decision
			if sel.Provider != nil {
				backend, layers, as = sel.Provider.Name(), sel.Provider.Layers(), decide(sel.Provider)
			} else {
				core, _ := provider.Lookup(provider.Core)
				as = decide(core)
			}
			ok := selErr == nil
			for _, a := range as {
				if a.Missing != "" {
					ok = false
				}
			}
			// The ledger for every backend that can run here, so a user
			// sees what each one enforces and what --backend would give.
			var per []backendLedger
			for _, p := range provider.Registry() {
				if avail, _ := p.Available(h); !avail || len(p.Ledger()) == 0 {
					continue
				}
				per = append(per, backendLedger{Name: p.Name(), Guarantees: decide(p)})
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(struct {
					JSONAPI    int                   `json:"json_api"`
					Host       host.Info             `json:"host"`
					Backend    string                `json:"backend"`
					Layers     []string              `json:"layers"`
					Skipped    []spec.SkippedBackend `json:"skipped_backends"`
					RunAsRoot  bool                  `json:"run_as_root"`
					Guarantees []ledger.Decision     `json:"guarantees"`
					Backends   []backendLedger       `json:"backends"`
					OK         bool                  `json:"ok"`
				}{JSONAPI, h, backend, layers, sel.Skipped, runAsRoot, as, per, ok})
			} else if verbose {
				printCheck(stdout, h, sel, runAsRoot, as, per)
			} else {
				printCheckSummary(stdout, h, sel, runAsRoot, as, per)
			}
			if selErr != nil {
				return &exitError{1, selErr.Error()}
			}
			if !ok {
				return &exitError{1, "some guarantees cannot be enforced on this host (see above)"}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "print the host's facts and every backend's ledger in full")
	return cmd
}

// probeHost is what reports show: the host's facts, with whether the
// namespaces backend works learned from a real run under it (the program
// every namespaced run executes), never a separate imitation of it.
func probeHost() host.Info {
	h := host.ProbeAll()
	if h.UserNS {
		if err := confine.ProbeNamespaces(context.Background()); err != nil {
			h.UserNS, h.UserNSErr = false, err.Error()
		}
	}
	return h
}

// backendLedger is the ledger resolved for one backend on this host.
type backendLedger struct {
	Name       string            `json:"name"`
	Guarantees []ledger.Decision `json:"guarantees"`
}

func printCheck(w io.Writer, h host.Info, sel provider.Selection, runAsRoot bool, as []ledger.Decision, per []backendLedger) {
	yn := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	ll := fmt.Sprintf("ABI %d, errata 0x%x", h.LandlockABI, h.LandlockErrata)
	if h.LandlockErr != "" {
		ll = "unavailable: " + h.LandlockErr
	}
	printSelection(w, sel)
	fmt.Fprintf(w, "landlock:         %s\n", ll)
	fmt.Fprintf(w, "seccomp:          %s\n", yn(h.Seccomp))
	userns := yn(h.UserNS)
	if h.UserNSErr != "" {
		userns += " (" + h.UserNSErr + ")"
	}
	fmt.Fprintf(w, "user namespaces:  %s\n", userns)
	bw := "not installed"
	switch {
	case h.Bwrap != "" && h.BwrapErr != "":
		bw = h.Bwrap + " (cannot create its namespaces: " + h.BwrapErr + ")"
	case h.Bwrap != "":
		bw = h.Bwrap + " (works; --backend bwrap)"
	}
	fmt.Fprintf(w, "bubblewrap:       %s\n", bw)
	fmt.Fprintf(w, "cgroup v2 deleg.: %s\n", yn(h.CgroupV2))
	fmt.Fprintf(w, "pids cgroup:      %s\n", orNone(h.PidsCgroupRoot))
	mc := "none: the launcher's memory watch bounds the whole tree (it samples the processes' resident memory), RLIMIT_DATA each process"
	if h.MemoryCgroup.Parent != "" {
		mc = h.MemoryCgroup.Parent + " (a child per run bounds the whole tree"
		if h.MemoryCgroup.Cap > 0 {
			// v2, beside the launcher: no more than its own cgroups allow.
			mc += fmt.Sprintf(", at most %d bytes: the launcher's own memory.max", h.MemoryCgroup.Cap)
		}
		mc += ")"
	}
	fmt.Fprintf(w, "memory cgroup:    %s\n", mc)
	fmt.Fprintf(w, "default memory:   %d MiB (half of RAM, at most the caller's cgroup limit)\n", host.DefaultMemoryBound(spec.DefaultLimits().MemoryBytes)>>20)
	fmt.Fprintf(w, "io_uring present: %s (denied inside the sandbox)\n", yn(h.IOUring))
	fmt.Fprintf(w, "command runs as:  %s\n\nguarantees:\n", runsAs(h, runAsRoot))
	printDecisions(w, as)
	for _, b := range per {
		if sel.Provider != nil && b.Name == sel.Provider.Name() {
			continue
		}
		fmt.Fprintf(w, "\nwith --backend %s:\n", b.Name)
		printDecisions(w, b.Guarantees)
	}
}

// runsAs says whom the command runs as.
func runsAs(h host.Info, runAsRoot bool) string {
	if h.EUID != 0 {
		return fmt.Sprintf("uid %d", h.EUID)
	}
	who := "the work directory's owner, with every capability dropped"
	if runAsRoot {
		who += " (uid 0 here)"
	}
	return who
}

// summaryWidth bounds a line of the short `confine check`: a mechanism's
// text is cut there (--verbose prints it whole).
const summaryWidth = 100

// printCheckSummary is `confine check` without --verbose: the backend,
// one line per guarantee (held, by what, or what it needs) and one line
// for the other backends, so it fits a screen.
func printCheckSummary(w io.Writer, h host.Info, sel provider.Selection, runAsRoot bool, as []ledger.Decision, per []backendLedger) {
	if sel.Provider == nil {
		fmt.Fprintf(w, "backend:    NONE\n")
		for _, sk := range sel.Skipped {
			fmt.Fprintln(w, cut(fmt.Sprintf("skipped:    %s: %s", sk.Name, sk.Reason)))
		}
	} else {
		fmt.Fprintln(w, cut(fmt.Sprintf("backend:    %s (%s)", sel.Provider.Name(), strings.Join(sel.Provider.Layers(), ", "))))
	}
	ll := fmt.Sprintf("landlock ABI %d", h.LandlockABI)
	if h.LandlockErr != "" {
		ll = "no landlock"
	}
	facts := []string{ll, map[bool]string{true: "seccomp", false: "no seccomp"}[h.Seccomp],
		map[bool]string{true: "user namespaces", false: "no user namespaces"}[h.UserNS]}
	if h.MemoryCgroup.Parent != "" {
		facts = append(facts, "memory cgroup")
	}
	fmt.Fprintf(w, "host:       %s\n", strings.Join(facts, ", "))
	fmt.Fprintln(w, cut("runs as:    "+runsAs(h, runAsRoot)))
	held, missing, waived := tally(as)
	fmt.Fprintf(w, "guarantees: %d held, %d missing, %d waived\n", held, missing, waived)
	for _, a := range as {
		switch {
		case a.Missing != "":
			fmt.Fprintln(w, cut(fmt.Sprintf("  %-24s MISSING: needs %s", a.Name, a.Missing)))
		case a.Waived:
			fmt.Fprintf(w, "  %-24s waived\n", a.Name)
		default:
			fmt.Fprintln(w, cut(fmt.Sprintf("  %-24s %s", a.Name, a.Mechanism)))
		}
	}
	var others []string
	for _, b := range per {
		if sel.Provider != nil && b.Name == sel.Provider.Name() {
			continue
		}
		n, _, _ := tally(b.Guarantees)
		others = append(others, fmt.Sprintf("%s holds %d of %d", b.Name, n, len(b.Guarantees)))
	}
	if len(others) > 0 {
		fmt.Fprintln(w, cut("--backend:  "+strings.Join(others, "; ")))
	}
	fmt.Fprintln(w, "more:       confine check --verbose (every mechanism, host fact and backend), --json (the data)")
}

// tally counts decisions held, missing and waived.
func tally(ds []ledger.Decision) (held, missing, waived int) {
	for _, d := range ds {
		switch {
		case d.Missing != "":
			missing++
		case d.Waived:
			waived++
		default:
			held++
		}
	}
	return held, missing, waived
}

// cut shortens a line to summaryWidth runes, marking the cut.
func cut(s string) string {
	r := []rune(s)
	if len(r) <= summaryWidth {
		return s
	}
	return string(r[:summaryWidth-1]) + "…"
}

func printDecisions(w io.Writer, ds []ledger.Decision) {
	for _, a := range ds {
		if a.Missing != "" {
			fmt.Fprintf(w, "  %-24s MISSING: needs %s\n", a.Name, a.Missing)
			continue
		}
		fmt.Fprintf(w, "  %-24s %s\n", a.Name, a.Mechanism)
	}
}

// printSelection shows the provider a run would get and why the others
// were skipped.
func printSelection(w io.Writer, sel provider.Selection) {
	if sel.Provider == nil {
		fmt.Fprintf(w, "backend:          NONE\n")
	} else {
		fmt.Fprintf(w, "backend:          %s\n", sel.Provider.Name())
		fmt.Fprintf(w, "layers:           %s\n", strings.Join(sel.Provider.Layers(), ", "))
	}
	for _, sk := range sel.Skipped {
		fmt.Fprintf(w, "skipped:          %s: %s\n", sk.Name, sk.Reason)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// inspectHost is `confine inspect` without --last or --id: the backend a
// run gets on this host, its layers and why the others were skipped.
func inspectHost(stdout io.Writer, asJSON bool) error {
	h := probeHost()
	sel, err := provider.Select(h, provider.Request{Tier: policy.TierSandboxed})
	out := struct {
		Backend     string                `json:"backend"`
		LandlockABI int                   `json:"landlock_abi"`
		Layers      []string              `json:"layers"`
		Skipped     []spec.SkippedBackend `json:"skipped_backends"`
		Host        host.Info             `json:"host"`
	}{LandlockABI: h.LandlockABI, Skipped: sel.Skipped, Host: h}
	if sel.Provider != nil {
		out.Backend = sel.Provider.Name()
		out.Layers = append(sel.Provider.Layers(), "seccomp-notify")
		switch {
		case h.PidsCgroupRoot != "":
			out.Layers = append(out.Layers, "pids-cgroup (when the command runs as uid 0)")
		case h.Seccomp:
			out.Layers = append(out.Layers, "fork-count (when the command runs as uid 0)")
		}
	}
	if asJSON {
		if werr := writeJSON(stdout, out); werr != nil {
			return werr
		}
	} else {
		fmt.Fprintf(stdout, "backend: %s (landlock ABI %d)\n", orNone(out.Backend), h.LandlockABI)
		if len(out.Layers) > 0 {
			fmt.Fprintf(stdout, "layers:  %s\n", strings.Join(out.Layers, ", "))
		}
		for _, sk := range sel.Skipped {
			fmt.Fprintf(stdout, "skipped: %s: %s\n", sk.Name, sk.Reason)
		}
	}
	if err != nil {
		return &exitError{1, err.Error()}
	}
	return nil
}
