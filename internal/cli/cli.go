// Package cli is the confine command line: run, check, version and shell
// completion. Exit statuses follow env(1)/timeout(1): the command's own
// status, 128+N for death by signal N, 124 on timeout, 125 when confine
// itself fails or refuses, 126 when the program cannot be executed, 127
// when it is not found.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Exit statuses of confine itself.
const (
	ExitTimeout       = 124
	ExitConfine       = 125
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// exitError carries an exit status out of a cobra command.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Main runs the CLI with args and returns the process exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintf(stderr, "confine: %s\n", ee.msg)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "confine: %v\n", err)
	return ExitConfine
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "confine",
		Short:         "Run one untrusted command confined by Landlock, seccomp and rlimits",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &exitError{ExitConfine, err.Error()}
	})
	root.AddCommand(newRun(stdout, stderr), newCheck(stdout), newVersion(stdout))
	return root
}

func newVersion(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print confine's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := "(devel)"
			if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
				v = bi.Main.Version
			}
			fmt.Fprintf(stdout, "confine %s (backend %s)\n", v, confine.Backend)
			return nil
		},
	}
}

type runOpts struct {
	workdir, profile string
	ro, rw, env      []string
	limits           spec.Limits
	liveLimitSet     bool
	json             bool
}

func newRun(stdout, stderr io.Writer) *cobra.Command {
	o := &runOpts{}
	cmd := &cobra.Command{
		Use:   "run [flags] -- PROGRAM [ARGS...]",
		Short: "Run PROGRAM confined",
		Long: `Run PROGRAM confined: it may write only the work directory, a private temp
dir and --rw roots; read only system roots and --ro roots; reach no network;
signal, trace or inspect no process outside the run; and everything it starts
is gone when confine returns. Its environment is built from scratch.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return &exitError{ExitConfine, "run needs a PROGRAM after --"}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			o.liveLimitSet = cmd.Flags().Changed("output-limit")
			return o.run(cmd.Context(), args, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&o.workdir, "workdir", "", "work directory: the command's cwd and writable root (default: current directory)")
	f.StringVar(&o.profile, "profile", "default", "sandbox profile")
	f.StringArrayVar(&o.ro, "ro", nil, "extra read+execute root (repeatable)")
	f.StringArrayVar(&o.rw, "rw", nil, "extra writable root (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "pass NAME from this environment, or set NAME=VALUE (repeatable)")
	f.Var(durFlag{&o.limits.WallTime}, "timeout", "wall-clock limit, e.g. 30s, 5m (default 10m)")
	f.Var(durFlag{&o.limits.CPUTime}, "cpu-time", "CPU time limit per process (default 10m)")
	f.Var(durFlag{&o.limits.KillGrace}, "kill-grace", "time between SIGTERM and SIGKILL when the run is ended (default 2s)")
	f.Var(sizeFlag{&o.limits.OutputBytes}, "output-limit", "bytes kept per output stream, head and tail (default 1MiB; also bounds live output when given)")
	f.Var(sizeFlag{&o.limits.MemoryBytes}, "memory", "address-space limit per process (default 8GiB)")
	f.Var(sizeFlag{&o.limits.FileSizeBytes}, "max-file-size", "largest file the command may write (default 8GiB)")
	var procs int64
	f.Int64Var(&procs, "max-procs", 0, "process limit (default 1024)")
	f.Var(sizeFlag{&o.limits.OpenFiles}, "max-open-files", "open file limit (default 4096)")
	f.BoolVar(&o.json, "json", false, "capture output and print the result as one JSON object")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if procs < 0 {
			return &exitError{ExitConfine, "--max-procs must not be negative"}
		}
		o.limits.MaxProcs = procs
		return nil
	}
	return cmd
}

func (o *runOpts) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	wd := o.workdir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return &exitError{ExitConfine, fmt.Sprintf("current directory: %v", err)}
		}
	}
	wd, err := absClean(wd)
	if err != nil {
		return &exitError{ExitConfine, fmt.Sprintf("--workdir: %v", err)}
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		return &exitError{ExitConfine, fmt.Sprintf("--workdir %s: not an existing directory", wd)}
	}
	ro, err := absAll("--ro", o.ro)
	if err != nil {
		return err
	}
	rw, err := absAll("--rw", o.rw)
	if err != nil {
		return err
	}
	env, err := buildEnv(o.env)
	if err != nil {
		return err
	}
	s := spec.CommandSpec{
		Program:  args[0],
		Args:     args[1:],
		Worktree: wd,
		Env:      env,
		ReadOnly: ro,
		// The work directory is already writable.
		ReadWrite: rw,
		Profile:   o.profile,
		Limits:    o.limits,
		Network:   spec.DenyAll,
	}
	eng, err := policy.NewEngine()
	if err != nil {
		return &exitError{ExitConfine, err.Error()}
	}
	c, err := eng.Mint(o.profile, "cli", 0)
	if err != nil {
		return &exitError{ExitConfine, err.Error()}
	}
	l := &confine.Launcher{Stdin: os.Stdin}
	if !o.json {
		l.LiveStdout, l.LiveStderr = stdout, stderr
		if o.liveLimitSet {
			l.LiveLimit = o.limits.OutputBytes
		}
	}
	res, err := l.RunCommand(ctx, c, s)
	if len(res.PathOmitted) > 0 {
		fmt.Fprintf(stderr, "confine: PATH: left out %s (outside the read roots, writable, or unresolvable; grant with --ro)\n", strings.Join(res.PathOmitted, ", "))
	}
	if err != nil {
		switch {
		case errors.Is(err, spec.ErrNotFound):
			return &exitError{ExitNotFound, err.Error()}
		case errors.Is(err, spec.ErrNotExecutable):
			return &exitError{ExitNotExecutable, err.Error()}
		case errors.Is(err, context.Canceled) && res.Cancelled:
			if o.json {
				printJSON(stdout, res)
			}
			return &exitError{128 + int(syscall.SIGINT), "interrupted; the command's process tree was ended"}
		}
		return &exitError{ExitConfine, err.Error()}
	}
	if o.json {
		printJSON(stdout, res)
	} else {
		reportDenials(stderr, res.Denials)
		for _, st := range []struct {
			name string
			s    spec.Stream
		}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
			if o.liveLimitSet && st.s.Total > o.limits.OutputBytes {
				fmt.Fprintf(stderr, "confine: %s truncated after %d of %d bytes\n", st.name, o.limits.OutputBytes, st.s.Total)
			}
		}
	}
	switch {
	case res.TimedOut:
		if !o.json {
			fmt.Fprintf(stderr, "confine: timed out after %s; the command's process tree was ended\n", o.timeout())
		}
		return &exitError{ExitTimeout, ""}
	case res.Signal != 0:
		return &exitError{128 + res.Signal, ""}
	case res.ExitCode != 0:
		return &exitError{res.ExitCode, ""}
	}
	return nil
}

// reportDenials tells a human what the sandbox refused in user space, so a
// failing build says why.
func reportDenials(w io.Writer, ds []spec.Denial) {
	const show = 10
	for i, d := range ds {
		if i == show {
			fmt.Fprintf(w, "confine: ... and %d more denials (see --json)\n", len(ds)-show)
			break
		}
		fmt.Fprintf(w, "confine: denied %s %s: %s (%s)\n", d.Syscall, d.Path, d.Reason, d.Errno)
	}
}

func (o *runOpts) timeout() string {
	if o.limits.WallTime != 0 {
		return o.limits.WallTime.String()
	}
	return spec.DefaultLimits.WallTime.String()
}

func printJSON(w io.Writer, res spec.CommandResult) {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(res)
}

// buildEnv makes the command's environment from scratch: LANG, TERM when
// set, and what --env asks for. PATH, HOME and TMPDIR are added by the
// launcher when not given.
func buildEnv(flags []string) ([]string, error) {
	env := []string{"LANG=C.UTF-8"}
	if t, ok := os.LookupEnv("TERM"); ok {
		env = append(env, "TERM="+t)
	}
	for _, e := range flags {
		name, val, hasVal := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, "\x00") {
			return nil, &exitError{ExitConfine, fmt.Sprintf("--env %q: want NAME or NAME=VALUE", e)}
		}
		if !hasVal {
			v, ok := os.LookupEnv(name)
			if !ok {
				return nil, &exitError{ExitConfine, fmt.Sprintf("--env %s: not set in this environment", name)}
			}
			val = v
		}
		env = setEnv(env, name, val)
	}
	return env, nil
}

func setEnv(env []string, name, val string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			env[i] = name + "=" + val
			return env
		}
	}
	return append(env, name+"="+val)
}

func absClean(p string) (string, error) {
	if p == "" {
		return "", errors.New("empty path")
	}
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.Clean(a), nil
}

func absAll(flag string, ps []string) ([]string, error) {
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		a, err := absClean(p)
		if err != nil {
			return nil, &exitError{ExitConfine, fmt.Sprintf("%s %q: %v", flag, p, err)}
		}
		if _, err := os.Stat(a); err != nil {
			return nil, &exitError{ExitConfine, fmt.Sprintf("%s %s: %v", flag, a, err)}
		}
		out = append(out, a)
	}
	return out, nil
}

func newCheck(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Report what this host can enforce, guarantee by guarantee",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			h := host.ProbeAll()
			runAsRoot := h.EUID == 0
			if runAsRoot {
				if wd, err := os.Getwd(); err == nil {
					var st syscall.Stat_t
					if syscall.Stat(wd, &st) == nil {
						runAsRoot = st.Uid == 0
					}
				}
			}
			as := policy.Assess(h, runAsRoot, h.PidsCgroupRoot != "")
			ok := true
			for _, a := range as {
				if a.Missing != "" {
					ok = false
				}
			}
			if asJSON {
				enc := json.NewEncoder(stdout)
				enc.SetIndent("", "  ")
				_ = enc.Encode(struct {
					Host       host.Info           `json:"host"`
					Backend    string              `json:"backend"`
					RunAsRoot  bool                `json:"run_as_root"`
					Guarantees []policy.Assessment `json:"guarantees"`
					OK         bool                `json:"ok"`
				}{h, confine.Backend, runAsRoot, as, ok})
			} else {
				printCheck(stdout, h, runAsRoot, as)
			}
			if !ok {
				return &exitError{1, "some guarantees cannot be enforced on this host (see above)"}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func printCheck(w io.Writer, h host.Info, runAsRoot bool, as []policy.Assessment) {
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
	fmt.Fprintf(w, "backend:          %s\n", confine.Backend)
	fmt.Fprintf(w, "landlock:         %s\n", ll)
	fmt.Fprintf(w, "seccomp:          %s\n", yn(h.Seccomp))
	fmt.Fprintf(w, "user namespaces:  %s\n", yn(h.UserNS))
	fmt.Fprintf(w, "cgroup v2 deleg.: %s\n", yn(h.CgroupV2))
	fmt.Fprintf(w, "pids cgroup:      %s\n", orNone(h.PidsCgroupRoot))
	fmt.Fprintf(w, "io_uring present: %s (denied inside the sandbox)\n", yn(h.IOUring))
	who := fmt.Sprintf("uid %d", h.EUID)
	if h.EUID == 0 {
		who = "the work directory's owner, with every capability dropped"
		if runAsRoot {
			who += " (uid 0 here)"
		}
	}
	fmt.Fprintf(w, "command runs as:  %s\n\nguarantees:\n", who)
	for _, a := range as {
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
