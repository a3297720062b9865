//go:build linux || darwin

// Package cli is the confine command line: run, check, version and shell
// completion. Exit statuses follow env(1)/timeout(1): the command's own
// status, 128+N for death by signal N, 124 on timeout, 125 when confine
// itself fails or refuses, 126 when the program cannot be executed, 127
// when it is not found.
package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/esc"
	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/internal/token"
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

// causedExit is an exitError with the library error behind it, so that
// `run --json` can name the refusal's kind.
type causedExit struct {
	*exitError
	cause error
}

func (e *causedExit) Unwrap() error { return e.exitError }

// confineFailed is err as confine's own failure (ExitConfine), its message
// printed as it is.
func confineFailed(err error) error {
	return &exitError{ExitConfine, err.Error()}
}

func refused(code int, err error) error {
	return &causedExit{&exitError{code, err.Error()}, err}
}

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
			fmt.Fprintf(stderr, "confine: %s\n", esc.Text(ee.msg))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "confine: %s\n", esc.Text(err.Error()))
	return ExitConfine
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "confine",
		Short:         "Run one untrusted command confined by Landlock, seccomp and rlimits",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionString(),
	}
	root.SetVersionTemplate("confine {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return confineFailed(err)
	})
	root.AddCommand(newRun(stdout, stderr), newCheck(stdout), newVersion(stdout), newCap(stdout), newInspect(stdout), newSelftest(stdout, stderr), newMan(stdout), newApprove(stdout, stderr), newServe(stderr))
	addTier1(root, stdout, stderr)
	return root
}

// JSONAPI is the revision of the machine-readable interface (spec.JSONAPI).
const JSONAPI = spec.JSONAPI

func newVersion(stdout io.Writer) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print confine's version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := versionString()
			backends := backendNames()
			if asJSON {
				return writeJSON(stdout, struct {
					Version  string   `json:"version"`
					JSONAPI  int      `json:"json_api"`
					Backends []string `json:"backends"`
				}{v, JSONAPI, backends})
			}
			fmt.Fprintf(stdout, "confine %s (backends %s)\n", v, strings.Join(backends, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print as JSON, with the revision of the --json interfaces (json_api)")
	return cmd
}

type runOpts struct {
	// control are control paths beyond the defaults no run may reach
	// (a server's socket directory; see controlPaths).
	control []string
	// warm is the server's state shared between runs (nil: none).
	warm             *confine.Warm
	workdir, profile string
	eventLog         string
	backend          string
	capToken, capKey string
	// requireCap refuses a run without --cap (run --require-cap,
	// $CONFINE_REQUIRE_CAP, serve --require-cap).
	requireCap   bool
	ro, rw, env  []string
	task, job    string
	approvals    []string
	limits       spec.Limits
	liveLimitSet bool
	json         bool
	// resultFD (--result-fd): the result object goes to this descriptor,
	// resultOut, while the output streams live.
	resultFD  int
	resultOut io.Writer
	verbose   bool
	// dieWithParent ends the run when confine's parent process exits.
	dieWithParent bool
	// server is the socket of the confine server that runs the command
	// (run --server, $CONFINE_SERVER); "" runs it here.
	server string
	// environ, in the server, is the caller's environment that recipes
	// are discovered in (nil: this process's).
	environ []string
}

func newRun(stdout, stderr io.Writer) *cobra.Command {
	o := &runOpts{}
	var procs int64
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
			var err error
			if args, err = serverArgument(cmd.Flags(), args); err != nil {
				return err
			}
			if procs < 0 {
				return &exitError{ExitConfine, "--max-procs must not be negative"}
			}
			o.limits.MaxProcs = procs
			o.liveLimitSet = cmd.Flags().Changed("output-limit")
			if !cmd.Flags().Changed("server") {
				o.server = os.Getenv(ServerEnv)
			}
			if cmd.Flags().Changed("result-fd") {
				f, err := o.openResultFD()
				if err != nil {
					return err
				}
				defer f.Close()
			}
			o.requireCap = o.requireCap || requireCapEnv(os.Getenv)
			err = o.run(cmd.Context(), args, stdout, stderr)
			if o.json {
				printRefusal(o.jsonOut(stdout), err)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	f.StringVar(&o.workdir, "workdir", "", "work directory: the command's cwd and writable root (default: current directory)")
	f.StringVar(&o.profile, "profile", "default", "sandbox profile: a built-in name or a TOML file path")
	f.StringVar(&o.capToken, "cap", "", "run under this signed capability token (from \"confine cap mint\") instead of minting one")
	f.StringVar(&o.capKey, "cap-key", "", "key file that verifies --cap tokens (default $XDG_CONFIG_HOME/confine/cap.key)")
	f.BoolVar(&o.requireCap, "require-cap", false, "refuse to run without a valid --cap token (also $"+RequireCapEnv+"=1)")
	f.StringArrayVar(&o.ro, "ro", nil, "extra read+execute root (repeatable)")
	f.StringArrayVar(&o.rw, "rw", nil, "extra writable root (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "pass NAME from this environment, or set NAME=VALUE (repeatable)")
	f.StringVar(&o.task, "task", "", "task id for the audit records (and the scope of --approval grants)")
	f.StringVar(&o.job, "job", "", "job id for the audit records")
	f.StringArrayVar(&o.approvals, "approval", nil, "egress grant token from `confine approve` (repeatable; verified with --cap-key)")
	f.Var(durFlag{&o.limits.WallTime}, "timeout", "wall-clock limit, e.g. 30s, 5m (default 10m)")
	f.Var(durFlag{&o.limits.CPUTime}, "cpu-time", "CPU time limit per process (default 10m)")
	f.Var(durFlag{&o.limits.KillGrace}, "kill-grace", "time between SIGTERM and SIGKILL when the run is ended (default 2s)")
	f.Var(sizeFlag{&o.limits.OutputBytes}, "output-limit", "bytes kept per output stream, head and tail (default 1MiB; also bounds live output when given)")
	f.Var(sizeFlag{&o.limits.MemoryBytes}, "memory", "memory bound for the whole tree: a memory cgroup of the run where one can be made, else the launcher's memory watch, and RLIMIT_DATA per process; the result's memory_bound says which (default: half of RAM, at most the caller's cgroup limit)")
	f.Var(sizeFlag{&o.limits.FileSizeBytes}, "max-file-size", "largest file the command may write (default 8GiB)")
	f.Int64Var(&procs, "max-procs", 0, "process limit (default 1024)")
	f.Var(sizeFlag{&o.limits.OpenFiles}, "max-open-files", "open file limit (default 4096)")
	f.BoolVar(&o.json, "json", false, "capture output and print the result as one JSON object (a refusal as {\"error\": {...}})")
	f.BoolVar(&o.dieWithParent, "die-with-parent", false, "end the run (exit 129) when the process that started confine exits, even by SIGKILL")
	f.IntVar(&o.resultFD, "result-fd", 0, "stream output live and write the result (or refusal) object of --json to this open descriptor (3 or above)")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "say on stderr what the result records besides the outcome: PATH components left out, a skipped event log")
	f.StringVar(&o.backend, "backend", "auto", "confinement backend: auto, namespaces (landlock+namespaces), core (landlock+seccomp), bwrap (bubblewrap; never chosen by auto)")
	addServerFlag(f, o)
	completeRunFlags(cmd)
	f.StringVar(&o.eventLog, "event-log", "", "JSON-lines event log (default $CONFINE_EVENT_LOG, else $XDG_STATE_HOME/confine/events.jsonl; \"off\" disables)")
	return cmd
}

// backendValues are --backend's values, for completion.
var backendValues = []string{"auto", "namespaces", "core", "bwrap"}

// completeRunFlags gives shell completion the values of --profile (the
// built-in names, or a TOML file) and --backend.
func completeRunFlags(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("profile", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return policy.Names(), cobra.ShellCompDirectiveDefault
	})
	_ = cmd.RegisterFlagCompletionFunc("backend", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return backendValues, cobra.ShellCompDirectiveNoFileComp
	})
}

// openResultFD takes --result-fd's descriptor as the result's writer,
// with --json's objects and live output.
func (o *runOpts) openResultFD() (*os.File, error) {
	if o.resultFD < 3 {
		return nil, &exitError{ExitConfine, fmt.Sprintf("--result-fd %d: want an open descriptor of 3 or above (0 to 2 are the command's)", o.resultFD)}
	}
	if o.server != "" {
		return nil, &exitError{ExitConfine, "--result-fd is not available with --server; use --json"}
	}
	if _, err := unix.FcntlInt(uintptr(o.resultFD), unix.F_GETFD, 0); err != nil {
		return nil, &exitError{ExitConfine, fmt.Sprintf("--result-fd %d: %v", o.resultFD, err)}
	}
	// Not inherited by anything confine starts.
	unix.CloseOnExec(o.resultFD)
	f := os.NewFile(uintptr(o.resultFD), "result")
	o.json, o.resultOut = true, f
	return f, nil
}

// jsonOut is where --json's objects go: --result-fd's descriptor, else
// stdout.
func (o *runOpts) jsonOut(stdout io.Writer) io.Writer {
	if o.resultOut != nil {
		return o.resultOut
	}
	return stdout
}

func (o *runOpts) run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	if o.dieWithParent {
		var unwatch func()
		var how string
		var err error
		if ctx, unwatch, how, err = watchParent(ctx); err != nil {
			return confineFailed(err)
		}
		defer unwatch()
		if o.verbose {
			fmt.Fprintf(stderr, "confine: --die-with-parent: %s\n", how)
		}
	}

	p, err := o.prepare(args, stderr)
	if err != nil {
		return err
	}
	var res spec.CommandResult
	if o.server != "" {
		// The event log is this side's (the server trusts the path it
		// is sent), so its refusal is this side's too: after the
		// capability's, as in a direct run, though the server checks
		// the capability again.
		if err := o.checkRequireCap(); err != nil {
			return refused(ExitConfine, err)
		}
		if p.logErr != nil {
			if _, err := o.capability(p.prof); err != nil {
				return refused(ExitConfine, err)
			}
			return refused(ExitConfine, p.logErr)
		}
		res, err = o.viaServer(ctx, p, stdout, stderr)
	} else {
		res, err = o.execute(ctx, p, os.Stdin, stdout, stderr, nil)
	}
	err = o.finish(res, err, p.logSkipped, stdout, stderr)
	if err != nil && res.Cancelled && errors.Is(context.Cause(ctx), errParentExited) {
		return &exitError{128 + int(syscall.SIGHUP), errParentExited.Error() + "; the command's process tree was ended"}
	}
	return err
}

// prepared is a run as the CLI builds it from its flags and the caller's
// environment, before the library takes it (here, or in `confine serve`).
type prepared struct {
	spec                spec.CommandSpec
	prof                policy.Profile
	logPath, logSkipped string
	// logErr refuses the run, after the capability check, when the
	// event log the caller named cannot be written.
	logErr error
}

// prepare builds the spec from the flags and this process's environment.
func (o *runOpts) prepare(args []string, stderr io.Writer) (*prepared, error) {
	wd := o.workdir
	if wd == "" {
		var err error
		if wd, err = os.Getwd(); err != nil {
			return nil, &exitError{ExitConfine, fmt.Sprintf("current directory: %v", err)}
		}
	}
	wd, err := absClean(wd)
	if err != nil {
		return nil, &exitError{ExitConfine, fmt.Sprintf("--workdir: %v", err)}
	}
	if st, err := os.Stat(wd); err != nil || !st.IsDir() {
		return nil, &exitError{ExitConfine, fmt.Sprintf("--workdir %s: not an existing directory", wd)}
	}
	ro, err := absAll("--ro", o.ro)
	if err != nil {
		return nil, err
	}
	rw, err := absAll("--rw", o.rw)
	if err != nil {
		return nil, err
	}
	prof, err := policy.ResolveProfile(o.profile)
	if err != nil {
		return nil, refused(ExitConfine, err)
	}
	env, skipped, err := buildEnv(prof, o.env)
	if err != nil {
		return nil, err
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "confine: environment: left out %s (refused by the sanitiser; waive by exact name in a profile)\n", esc.Join(skipped, ", "))
	}
	p := &prepared{prof: prof, spec: spec.CommandSpec{
		Program:  args[0],
		Args:     args[1:],
		Worktree: wd,
		Env:      env,
		ReadOnly: ro,
		// The work directory is already writable.
		ReadWrite: rw,
		Profile:   prof.Name,
		Limits:    o.limits,
		// The profile's: deny-all unless it is an allowlist.
		Network:   prof.Network,
		TaskID:    o.task,
		JobID:     o.job,
		Approvals: o.approvals,
	}}
	// Reported after the capability's refusal (execute): a caller without
	// the right to run learns that first.
	p.logPath, p.logSkipped, p.logErr = resolveEventLog(o.eventLog)
	return p, nil
}

// execute runs p through the library: here for a direct run, in the
// server for `run --server`. callerEnv is nil for this process's own
// environment. A refused capability returns before anything runs, with
// an empty result.
func (o *runOpts) execute(ctx context.Context, p *prepared, stdin io.Reader, stdout, stderr io.Writer, callerEnv func(string) (string, bool)) (spec.CommandResult, error) {
	c, err := o.capability(p.prof)
	if err != nil {
		return spec.CommandResult{}, err
	}
	if p.logErr != nil {
		return spec.CommandResult{}, p.logErr
	}
	// The CLI exits right after: the run's init may clean up behind it.
	l := &confine.Launcher{Stdin: stdin, EventLog: p.logPath, Backend: o.backend, DetachCleanup: true, CallerEnv: callerEnv,
		ControlPaths: o.controlPaths(), Warm: o.warm,
		// A silent audit gap is worse than noise.
		EventLogError: func(err error) { fmt.Fprintf(stderr, "confine: %s\n", esc.Text(err.Error())) }}
	if !o.json || o.resultOut != nil {
		l.LiveStdout, l.LiveStderr = stdout, stderr
		if o.liveLimitSet {
			l.LiveLimit = o.limits.OutputBytes
		}
	}
	return l.RunCommand(ctx, c, p.spec)
}

// controlPaths are the run's control paths beyond the library's
// defaults: the key file named by --cap-key and what o.control holds.
func (o *runOpts) controlPaths() []string {
	out := append([]string(nil), o.control...)
	if o.capKey != "" {
		if a, err := filepath.Abs(o.capKey); err == nil {
			out = append(out, a)
		}
	}
	return out
}

// runError maps a failed run to the CLI's exit status and message.
func runError(res spec.CommandResult, err error) error {
	switch {
	case errors.Is(err, spec.ErrNotFound):
		return refused(ExitNotFound, err)
	case errors.Is(err, spec.ErrNotExecutable):
		return refused(ExitNotExecutable, err)
	case errors.Is(err, context.Canceled) && res.Cancelled:
		return &exitError{128 + int(syscall.SIGINT), "interrupted; the command's process tree was ended"}
	}
	return refused(ExitConfine, err)
}

// finish reports a run's outcome as `confine run` does, wherever it ran,
// and returns its exit status.
func (o *runOpts) finish(res spec.CommandResult, err error, logSkipped string, stdout, stderr io.Writer) error {
	if res.RunID == "" && err != nil {
		// Refused before the library took the run (the capability).
		return refused(ExitConfine, err)
	}
	res.EventLogSkipped = logSkipped
	// The result records these; a line on every run would read as an
	// error (most developers' PATH has per-user toolchain directories).
	if o.verbose && len(res.PathOmitted) > 0 {
		fmt.Fprintf(stderr, "confine: PATH: left out %s (outside the read roots, writable, or unresolvable; grant with --ro)\n", esc.Join(res.PathOmitted, ", "))
	}
	if o.verbose && logSkipped != "" {
		fmt.Fprintf(stderr, "confine: event log skipped: %s\n", esc.Text(logSkipped))
	}
	if err != nil {
		ee := runError(res, err)
		if o.json && errors.Is(err, context.Canceled) && res.Cancelled {
			printJSON(o.jsonOut(stdout), res)
		}
		return ee
	}
	if o.json {
		printJSON(o.jsonOut(stdout), res)
	} else {
		reportDenials(stderr, res.Denials)
		for _, c := range res.Persistence {
			fmt.Fprintf(stderr, "confine: the command %s %s (%s), which a program outside the sandbox may run later\n", esc.Text(c.Kind), esc.Text(c.Path), esc.Text(c.What))
		}
		reportEgress(stderr, res.Connections)
		for _, st := range []struct {
			name string
			s    spec.Stream
		}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
			if o.liveLimitSet && st.s.Total > o.limits.OutputBytes {
				fmt.Fprintf(stderr, "confine: %s truncated after %d of %d bytes\n", st.name, o.limits.OutputBytes, st.s.Total)
			}
		}
	}
	if res.MemoryLimitKilled && !o.json {
		// Otherwise a bare SIGKILL (exit 137) with no word of why.
		if res.OOMKilled {
			fmt.Fprintln(stderr, "confine: the run reached its memory bound (--memory, for the whole tree); the kernel killed a process of it (oom_killed)")
		} else {
			fmt.Fprintln(stderr, "confine: the run reached its memory bound (--memory, for the whole tree); confine killed the whole run (memory_limit_killed)")
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
		line := fmt.Sprintf("confine: denied %s %s: %s (%s)", esc.Text(d.Syscall), esc.Text(d.Path), esc.Text(d.Reason), esc.Text(d.Errno))
		if d.Hint != "" {
			line += "; to allow it: " + esc.Text(d.Hint)
		}
		fmt.Fprintln(w, line)
	}
}

// RequireCapEnv, set to anything but "" or "0", makes every `confine run`
// and `confine serve` of that environment refuse runs without --cap.
const RequireCapEnv = "CONFINE_REQUIRE_CAP"

func requireCapEnv(getenv func(string) string) bool {
	v := getenv(RequireCapEnv)
	return v != "" && v != "0"
}

// checkRequireCap refuses a run without a token when one is required; a
// token given is verified by capability as always.
func (o *runOpts) checkRequireCap() error {
	if o.requireCap && strings.TrimSpace(o.capToken) == "" {
		return fmt.Errorf("%w: this confine requires a capability for every run (--require-cap or $%s); pass --cap TOKEN from `confine cap mint`", spec.ErrCapability, RequireCapEnv)
	}
	return nil
}

// capability mints a capability for this run, or, with --cap, verifies the
// caller's token against the configured key: tampered, expired, revoked or
// mismatched tokens are refused.
func (o *runOpts) capability(prof policy.Profile) (*policy.Cap, error) {
	if err := o.checkRequireCap(); err != nil {
		return nil, err
	}
	// Grants are signed with the capability key too.
	eng, err := engineFor(prof, o.capToken != "" || len(o.approvals) > 0, o.capKey)
	if err != nil {
		return nil, err
	}
	if o.environ != nil {
		eng.SetEnviron(o.environ)
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

// resolveEventLog picks a run's event log (as eventLogPath) and makes sure
// it can be written before anything runs. A log the caller configured
// (--event-log, $CONFINE_EVENT_LOG) that cannot be opened refuses the run:
// they asked for an audit trail. The default log is a convenience: when it
// has no location (no $XDG_STATE_HOME, $HOME or user-database home) or
// cannot be opened (a read-only home in a container), the run goes ahead
// unrecorded and skipped says why, for the result.
func resolveEventLog(flag string) (path, skipped string, err error) {
	explicit := flag != "" || os.Getenv("CONFINE_EVENT_LOG") != ""
	path, err = eventLogPath(flag)
	if err == nil && path != "" {
		var lg *eventlog.Log
		if lg, err = eventlog.Open(path, eventlog.DefaultMaxBytes, eventlog.DefaultKeep); err == nil {
			err = lg.Close()
		}
	}
	switch {
	case err == nil:
		return path, "", nil
	case explicit:
		return "", "", fmt.Errorf("event log %s: %w (set --event-log off to run without one)", path, err)
	}
	return "", fmt.Sprintf("the default event log is unusable: %v (set --event-log or $CONFINE_EVENT_LOG to record runs)", err), nil
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

// engineFor returns the engine a command mints or verifies its capability
// with: a fresh one, or, when keyed (there is a token or a grant to
// verify), the one of the key file at capKey. A profile from a file is
// registered with it.
func engineFor(prof policy.Profile, keyed bool, capKey string) (*policy.Engine, error) {
	var eng *policy.Engine
	var err error
	if keyed {
		eng, err = engineFromKey(capKey)
	} else {
		eng, err = policy.NewEngine()
	}
	if err != nil {
		return nil, err
	}
	if prof.Source != "" {
		if err := eng.Register(prof); err != nil {
			return nil, err
		}
	}
	return eng, nil
}

func engineFromKey(path string) (*policy.Engine, error) {
	if path == "" {
		var err error
		if path, err = DefaultKeyPath(); err != nil {
			return nil, err
		}
	}
	key, err := token.LoadKey(path)
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
					return confineFailed(err)
				}
			}
			if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
				return confineFailed(err)
			}
			key := make([]byte, token.MinKeySize)
			if _, err := rand.Read(key); err != nil {
				return confineFailed(err)
			}
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return &exitError{ExitConfine, fmt.Sprintf("key %s: %v (an existing key is never overwritten)", path, err)}
			}
			if _, err := fmt.Fprintf(f, "%x\n", key); err != nil {
				f.Close()
				return confineFailed(err)
			}
			if err := f.Close(); err != nil {
				return confineFailed(err)
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
				return confineFailed(err)
			}
			prof, err := policy.ResolveProfile(profile)
			if err != nil {
				return confineFailed(err)
			}
			if prof.Source != "" {
				if err := eng.Register(prof); err != nil {
					return confineFailed(err)
				}
			}
			cp, err := eng.Mint(prof.Name, scope, ttl)
			if err != nil {
				return confineFailed(err)
			}
			tok, err := eng.Token(cp)
			if err != nil {
				return confineFailed(err)
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
	return buildEnvFrom(prof, flags, os.Environ())
}

// buildEnvFrom is buildEnv with environ standing for the caller's
// environment (a server's client's).
func buildEnvFrom(prof policy.Profile, flags, environ []string) (env, skipped []string, err error) {
	set := append([]string(nil), prof.Env.Set...)
	for _, e := range flags {
		name, val, hasVal := strings.Cut(e, "=")
		if name == "" || strings.ContainsAny(name, "\x00") {
			return nil, nil, &exitError{ExitConfine, fmt.Sprintf("--env %q: want NAME or NAME=VALUE", e)}
		}
		if !hasVal {
			v, ok := lookupIn(environ, name)
			if !ok {
				return nil, nil, &exitError{ExitConfine, fmt.Sprintf("--env %s: not set in this environment", name)}
			}
			val = v
		}
		set = append(set, name+"="+val)
	}
	env, skipped, err = policy.BuildEnv(policy.EnvSources{
		Caller:      environ,
		Passthrough: append(append([]string(nil), policy.DefaultPassthrough()...), prof.Env.Passthrough...),
		Set:         set,
		Waive:       prof.Env.Waive,
	})
	if err != nil {
		return nil, nil, refused(ExitConfine, err)
	}
	if !hasName(env, "LANG") {
		env = append(env, "LANG=C.UTF-8")
	}
	return env, skipped, nil
}

// lookupIn is os.LookupEnv on environ (the last entry wins, as in a
// process's environment).
func lookupIn(environ []string, name string) (string, bool) {
	for i := len(environ) - 1; i >= 0; i-- {
		if n, v, ok := strings.Cut(environ[i], "="); ok && n == name {
			return v, true
		}
	}
	return "", false
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

// Kinds of refusal in `run --json`'s error object, one per sentinel error
// in spec (a client branches on them as the library does with errors.Is).
var refusalKinds = []struct {
	kind string
	err  error
}{
	{"unavailable", spec.ErrUnavailable},
	{"capability", spec.ErrCapability},
	{"invalid_spec", spec.ErrInvalidSpec},
	{"not_found", spec.ErrNotFound},
	{"not_executable", spec.ErrNotExecutable},
	{"launch", spec.ErrLaunch},
}

// refusalJSON is what `run --json` prints instead of a result when confine
// refused or failed before the command ran: its kind, the message stderr
// also carries, and the guarantees the message names (for "unavailable":
// those this host cannot enforce).
type refusalJSON struct {
	JSONAPI int           `json:"json_api"`
	Error   serve.Refusal `json:"error"`
}

// printRefusal writes err's refusal object when err is confine's own
// failure (125, 126, 127) and not the command's status.
func printRefusal(w io.Writer, err error) {
	var ee *exitError
	if !errors.As(err, &ee) || ee.msg == "" || (ee.code != ExitConfine && ee.code != ExitNotFound && ee.code != ExitNotExecutable) {
		return
	}
	r := refusalJSON{JSONAPI: JSONAPI}
	r.Error = refusalObject(err, ee.code, ee.msg)
	b, _ := json.Marshal(r)
	_, _ = w.Write(append(b, '\n'))
}

// serverError is a run's failure as the server reported it: its message,
// and the sentinel of its kind, so that errors.Is sees what it would have
// seen in a direct run.
type serverError struct {
	kind, msg string
	// denials are the refusal's, with the grant that would allow it.
	denials []spec.Denial
}

func (e *serverError) Error() string { return e.msg }

func (e *serverError) Unwrap() error {
	if e.kind == "cancelled" {
		return context.Canceled
	}
	for _, k := range refusalKinds {
		if k.kind == e.kind {
			return k.err
		}
	}
	return nil
}

// refusalObject is the inside of err's refusal object.
func refusalObject(err error, code int, msg string) serve.Refusal {
	r := serve.Refusal{Kind: "usage", Message: msg, ExitStatus: code}
	var ce *causedExit
	for _, k := range refusalKinds {
		if errors.As(err, &ce) && errors.Is(ce.cause, k.err) {
			r.Kind = k.kind
			break
		}
	}
	r.Guarantees = namedGuarantees(msg)
	var h *spec.Hinted
	var se *serverError
	switch {
	case errors.As(err, &ce) && errors.As(ce.cause, &h):
		r.Denials = []spec.Denial{h.Denial}
	case errors.As(err, &ce) && errors.As(ce.cause, &se):
		// Through a server: the refusal's denials as it sent them.
		r.Denials = se.denials
	}
	return r
}

// namedGuarantees returns the guarantee names msg mentions as whole words.
func namedGuarantees(msg string) []string {
	var out []string
	word := func(b byte) bool { return b == '-' || b >= 'a' && b <= 'z' || b >= '0' && b <= '9' }
	for _, g := range spec.Guarantees() {
		for i := 0; ; {
			j := strings.Index(msg[i:], g)
			if j < 0 {
				break
			}
			j += i
			end := j + len(g)
			if (j == 0 || !word(msg[j-1])) && (end == len(msg) || !word(msg[end])) {
				out = append(out, g)
				break
			}
			i = end
		}
	}
	return out
}

// writeVersioned is writeJSON for an object that carries no json_api of
// its own (a Tier 1 result): the same object with "json_api" first.
func writeVersioned(w io.Writer, v any) error {
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	b := bytes.TrimSpace(enc.Bytes())
	if len(b) < 2 || b[0] != '{' {
		return fmt.Errorf("writeVersioned: %T is not a JSON object", v)
	}
	head := fmt.Sprintf(`{"json_api":%d`, JSONAPI)
	if string(b) != "{}" {
		head += ","
	}
	var out bytes.Buffer
	if err := json.Indent(&out, append([]byte(head), b[1:]...), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err := w.Write(out.Bytes())
	return err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}
