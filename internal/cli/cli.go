//go:build linux || darwin

// Package cli is the confine command line: run, check, version and shell
// completion. Exit statuses follow env(1)/timeout(1): the command's own
// status, 128+N for death by signal N, 124 on timeout, 125 when confine
// itself fails or refuses, 126 when the program cannot be executed, 127
// when it is not found.
package cli

import (
	"context"
	"crypto/rand"
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
	"time"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/eventlog"
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
	if isProbe(args) {
		return runProbe(args[1:])
	}
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
	root.AddCommand(newRun(stdout, stderr), newCheck(stdout), newVersion(stdout), newCap(stdout), newInspect(stdout), newSelftest(stdout, stderr))
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
			fmt.Fprintf(stdout, "confine %s (backends %s)\n", v, strings.Join(backendNames(), ", "))
			return nil
		},
	}
}

type runOpts struct {
	workdir, profile string
	eventLog         string
	backend          string
	capToken, capKey string
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
	f.StringVar(&o.profile, "profile", "default", "sandbox profile: a built-in name or a TOML file path")
	f.StringVar(&o.capToken, "cap", "", "run under this signed capability token (from `confine cap mint`) instead of minting one")
	f.StringVar(&o.capKey, "cap-key", "", "key file that verifies --cap tokens (default $XDG_CONFIG_HOME/confine/cap.key)")
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
	f.StringVar(&o.backend, "backend", "auto", "confinement backend: auto, namespaces (landlock+namespaces), core (landlock+seccomp), bwrap (bubblewrap; never chosen by auto)")
	f.StringVar(&o.eventLog, "event-log", "", "JSON-lines event log (default $CONFINE_EVENT_LOG, else $XDG_STATE_HOME/confine/events.jsonl; \"off\" disables)")
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
	prof, err := policy.ResolveProfile(o.profile)
	if err != nil {
		return &exitError{ExitConfine, err.Error()}
	}
	env, skipped, err := buildEnv(prof, o.env)
	if err != nil {
		return err
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "confine: environment: left out %s (refused by the sanitiser; waive by exact name in a profile)\n", strings.Join(skipped, ", "))
	}
	s := spec.CommandSpec{
		Program:  args[0],
		Args:     args[1:],
		Worktree: wd,
		Env:      env,
		ReadOnly: ro,
		// The work directory is already writable.
		ReadWrite: rw,
		Profile:   prof.Name,
		Limits:    o.limits,
		Network:   spec.DenyAll,
	}
	c, err := o.capability(prof)
	if err != nil {
		return &exitError{ExitConfine, err.Error()}
	}
	logPath, err := eventLogPath(o.eventLog)
	if err != nil {
		return &exitError{ExitConfine, err.Error()}
	}
	// The CLI exits right after: the run's init may clean up behind it.
	l := &confine.Launcher{Stdin: os.Stdin, EventLog: logPath, Backend: o.backend, DetachCleanup: true,
		// A silent audit gap is worse than noise.
		EventLogError: func(err error) { fmt.Fprintf(stderr, "confine: %v\n", err) }}
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

// capability mints a capability for this run, or, with --cap, verifies the
// caller's token against the configured key: tampered, expired, revoked or
// mismatched tokens are refused.
func (o *runOpts) capability(prof policy.Profile) (*policy.Cap, error) {
	var eng *policy.Engine
	var err error
	if o.capToken == "" {
		eng, err = policy.NewEngine()
	} else {
		eng, err = engineFromKey(o.capKey)
	}
	if err != nil {
		return nil, err
	}
	if prof.Source != "" {
		if err := eng.Register(prof); err != nil {
			return nil, err
		}
	}
	if o.capToken == "" {
		return eng.Mint(prof.Name, "cli", 0)
	}
	c, err := eng.ParseToken(strings.TrimSpace(o.capToken))
	if err != nil {
		return nil, err
	}
	if c.Profile() != prof.Name {
		return nil, fmt.Errorf("%w: token is for profile %q, --profile is %q", spec.ErrCapability, c.Profile(), prof.Name)
	}
	return c, nil
}

// eventLogPath picks the event log: the flag, then $CONFINE_EVENT_LOG,
// then the user's state directory; "off" turns it off.
func eventLogPath(flag string) (string, error) {
	p := flag
	if p == "" {
		p = os.Getenv("CONFINE_EVENT_LOG")
	}
	switch {
	case p == "off":
		return "", nil
	case p == "":
		return eventlog.DefaultPath()
	case !filepath.IsAbs(p):
		return filepath.Abs(p)
	}
	return p, nil
}

// DefaultKeyPath is where the capability key lives unless --cap-key says.
func DefaultKeyPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("capability key: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "confine", "cap.key"), nil
}

func engineFromKey(path string) (*policy.Engine, error) {
	if path == "" {
		var err error
		if path, err = DefaultKeyPath(); err != nil {
			return nil, err
		}
	}
	key, err := policy.LoadKey(path)
	if err != nil {
		return nil, err
	}
	return policy.NewEngineWithKey(key)
}

func newCap(stdout io.Writer) *cobra.Command {
	c := &cobra.Command{
		Use:   "cap",
		Short: "Manage signed capability tokens for callers in other processes",
	}
	var keyPath string
	keygen := &cobra.Command{
		Use:   "keygen",
		Short: "Create the key that signs and verifies capability tokens (mode 0600)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			path := keyPath
			if path == "" {
				var err error
				if path, err = DefaultKeyPath(); err != nil {
					return &exitError{ExitConfine, err.Error()}
				}
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			key := make([]byte, policy.MinKeySize)
			if _, err := rand.Read(key); err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return &exitError{ExitConfine, fmt.Sprintf("key %s: %v (an existing key is never overwritten)", path, err)}
			}
			if _, err := fmt.Fprintf(f, "%x\n", key); err != nil {
				f.Close()
				return &exitError{ExitConfine, err.Error()}
			}
			if err := f.Close(); err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			fmt.Fprintln(stdout, path)
			return nil
		},
	}
	var profile, scope string
	var ttl time.Duration
	mint := &cobra.Command{
		Use:   "mint",
		Short: "Print a signed token for --profile and --scope, valid for --ttl",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			eng, err := engineFromKey(keyPath)
			if err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			prof, err := policy.ResolveProfile(profile)
			if err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			if prof.Source != "" {
				if err := eng.Register(prof); err != nil {
					return &exitError{ExitConfine, err.Error()}
				}
			}
			cp, err := eng.Mint(prof.Name, scope, ttl)
			if err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			tok, err := eng.Token(cp)
			if err != nil {
				return &exitError{ExitConfine, err.Error()}
			}
			fmt.Fprintln(stdout, tok)
			return nil
		},
	}
	for _, sc := range []*cobra.Command{keygen, mint} {
		sc.Flags().StringVar(&keyPath, "cap-key", "", "key file (default $XDG_CONFIG_HOME/confine/cap.key)")
	}
	mint.Flags().StringVar(&profile, "profile", "default", "profile the token is bound to (name or TOML file)")
	mint.Flags().StringVar(&scope, "scope", "cli", "scope the token is issued for")
	mint.Flags().Var(durFlag{&ttl}, "ttl", "how long the token is valid (required; tokens always expire)")
	c.AddCommand(keygen, mint)
	return c
}

func (o *runOpts) timeout() string {
	if o.limits.WallTime != 0 {
		return o.limits.WallTime.String()
	}
	return spec.DefaultLimits().WallTime.String()
}

// printJSON writes res as one JSON line, the captured output escaped
// straight into w rather than marshalled in memory first.
func printJSON(w io.Writer, res spec.CommandResult) {
	_ = res.WriteJSON(w)
}

// buildEnv makes the command's environment from scratch: the default
// passthrough set and the profile's, the profile's env.set, then --env
// (NAME alone takes the caller's value); every entry goes through the
// sanitiser, so a refused variable is an error naming it. PATH, HOME and
// TMPDIR are added by the launcher when not given.
func buildEnv(prof policy.Profile, flags []string) (env, skipped []string, err error) {
	set := append([]string(nil), prof.Env.Set...)
	for _, e := range flags {
		name, val, hasVal := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, "\x00") {
			return nil, nil, &exitError{ExitConfine, fmt.Sprintf("--env %q: want NAME or NAME=VALUE", e)}
		}
		if !hasVal {
			v, ok := os.LookupEnv(name)
			if !ok {
				return nil, nil, &exitError{ExitConfine, fmt.Sprintf("--env %s: not set in this environment", name)}
			}
			val = v
		}
		set = append(set, name+"="+val)
	}
	env, skipped, err = policy.BuildEnv(policy.EnvSources{
		Caller:      os.Environ(),
		Passthrough: append(append([]string(nil), policy.DefaultPassthrough()...), prof.Env.Passthrough...),
		Set:         set,
		Waive:       prof.Env.Waive,
	})
	if err != nil {
		return nil, nil, &exitError{ExitConfine, err.Error()}
	}
	if !hasName(env, "LANG") {
		env = append(env, "LANG=C.UTF-8")
	}
	return env, skipped, nil
}

func hasName(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
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

func newInspect(stdout io.Writer) *cobra.Command {
	var last int
	var id, logFlag string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "Show this host's backend choice, or past runs from the event log (--last N, --id ID)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if last == 0 && id == "" {
				return inspectHost(stdout, asJSON)
			}
			path, err := eventLogPath(logFlag)
			if err != nil || path == "" {
				return &exitError{ExitConfine, fmt.Sprintf("no event log (%v)", err)}
			}
			var evs []eventlog.Event
			if id != "" {
				e, err := eventlog.FindByID(path, id)
				if err != nil {
					return &exitError{ExitConfine, fmt.Sprintf("%s: %v", path, err)}
				}
				evs = []eventlog.Event{e}
			} else if evs, err = eventlog.ReadLast(path, last); err != nil {
				return &exitError{ExitConfine, fmt.Sprintf("%s: %v", path, err)}
			}
			if asJSON {
				return writeJSON(stdout, evs)
			}
			for i, e := range evs {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				eventlog.Format(stdout, e)
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&last, "last", 0, "show the last N runs")
	cmd.Flags().StringVar(&id, "id", "", "show the run with this run_id")
	cmd.Flags().StringVar(&logFlag, "event-log", "", "event log to read (default as for run)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return cmd
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
