//go:build darwin

package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/seatbelt"
)

// backendNames are the backends this build can run, for `confine version`.
func backendNames() []string { return confine.Backends() }

// isProbe: the escape probe is Linux's; macOS has the darwin-tagged live
// tests instead.
func isProbe([]string) bool { return false }

func runProbe([]string) int { return ExitConfine }

// macCheck is what `check` reports on macOS.
type macCheck struct {
	JSONAPI     int               `json:"json_api"`
	Backend     string            `json:"backend"`
	SandboxExec string            `json:"sandbox_exec"`
	Error       string            `json:"error,omitempty"`
	Guarantees  []ledger.Decision `json:"guarantees"`
	OK          bool              `json:"ok"`
}

func newCheck(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report what this host can enforce, guarantee by guarantee",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			r := macCheck{JSONAPI: JSONAPI, Backend: seatbelt.Name, SandboxExec: seatbelt.SandboxExec, Guarantees: seatbelt.Decide(os.Geteuid() == 0, workTreeHasGit()), OK: true}
			if err := seatbelt.Available(); err != nil {
				r.Backend, r.Error, r.OK = "", err.Error(), false
			}
			for _, d := range r.Guarantees {
				if d.Missing != "" {
					r.OK = false
				}
			}
			if asJSON {
				if err := writeJSON(stdout, r); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(stdout, "backend:          %s\n", orNone(r.Backend))
				if r.Error != "" {
					fmt.Fprintf(stdout, "skipped:          %s: %s\n", seatbelt.Name, r.Error)
				}
				fmt.Fprintf(stdout, "sandbox-exec:     %s\n\nguarantees:\n", seatbelt.SandboxExec)
				printDecisions(stdout, r.Guarantees)
			}
			if !r.OK {
				return &exitError{1, "some guarantees cannot be enforced on this host (see above); a run is refused unless its profile waives them"}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func inspectHost(stdout io.Writer, asJSON bool) error {
	backend := seatbelt.Name
	if err := seatbelt.Available(); err != nil {
		backend = ""
	}
	if asJSON {
		return writeJSON(stdout, struct {
			Backend string `json:"backend"`
		}{backend})
	}
	fmt.Fprintf(stdout, "backend: %s\n", orNone(backend))
	return nil
}

func newSelftest(io.Writer, io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:                "selftest",
		Short:              "Attack the sandbox on this host (Linux only; on macOS run the darwin live tests)",
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return &exitError{ExitConfine, "selftest attacks the Linux mechanisms; on macOS run `go test -run TestMacLive -v .` (see docs/platforms.md)"}
		},
	}
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

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
