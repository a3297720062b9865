//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/esc"
	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// ServerEnv names the server `confine run` sends its runs to, like
// --server: a socket path, or "default" for the default socket.
const ServerEnv = "CONFINE_SERVER"

// defaultServer is --server without a value.
const defaultServer = "default"

func addServerFlag(f *pflag.FlagSet, o *runOpts) {
	f.StringVar(&o.server, "server", "", "run through the confine server at SOCKET (--server=SOCKET, or --server SOCKET when SOCKET ends in .sock or is a socket; alone: the default socket; unset: $"+ServerEnv+", a socket or \"default\"; --server= runs here); refused, never run directly, when no server of this uid answers")
	f.Lookup("server").NoOptDefVal = defaultServer
}

// callerEnvNames are the variables the library reads from the caller's
// environment besides the spec's Env (confine.Launcher.CallerEnv); a
// client sends its values of these, and of its profile's credential
// routes, and nothing else of its environment.
var callerEnvNames = []string{"PATH", "TMPDIR", "HOME", "XDG_CACHE_HOME", "CONFINE_CACHE_DIR", "GOCACHE"}

func serverSocket(flag string) string {
	if flag == defaultServer {
		return serve.DefaultSocket(os.Getenv)
	}
	if a, err := filepath.Abs(flag); err == nil {
		return a
	}
	return flag
}

// viaServer sends the prepared run to the server and returns what the
// library returned there: the result, and the error rebuilt so that finish
// reports it as it reports a direct run's. It passes this process's stdin
// (through a pipe it feeds), stdout and stderr, so that live output and the
// event log's complaints land where a direct run puts them.
func (o *runOpts) viaServer(ctx context.Context, p *prepared, stdout, stderr io.Writer) (spec.CommandResult, error) {
	socket := serverSocket(o.server)
	wd, _ := os.Getwd()
	req := &serve.Request{Spec: p.spec, Profile: p.prof.Name, Backend: o.backend, CapToken: o.capToken,
		EventLog: p.logPath, Live: !o.json, Cwd: wd, CallerEnv: map[string]string{}}
	if p.prof.Source != "" {
		req.Profile = p.prof.Source
	}
	if o.capKey != "" {
		req.CapKey, _ = filepath.Abs(o.capKey)
	}
	if o.liveLimitSet {
		req.LiveLimit = o.limits.OutputBytes
	}
	names := append([]string(nil), callerEnvNames...)
	if a := p.prof.Allowlist; a != nil && p.prof.Network == spec.Allowlist {
		if ca, err := a.Compile(); err == nil {
			for _, r := range ca.CredentialRoutes() {
				names = append(names, r.Env)
			}
		}
	}
	for _, n := range names {
		if v, ok := os.LookupEnv(n); ok {
			req.CallerEnv[n] = v
		}
	}
	if p.prof.Source == "" && policy.IsRecipe(p.prof.Name) {
		// A recipe's tools (go env, rustc, npm...) read the caller's
		// environment, as they do when the recipe is resolved here.
		req.Environ = os.Environ()
	}
	conn, err := serve.Dial(socket)
	if err != nil {
		return spec.CommandResult{}, err
	}
	// stdin goes through a pipe this process feeds: the server closes
	// its end after the run, which a terminal's descriptor would not
	// allow without leaving it non-blocking for the shell.
	pr, pw, err := os.Pipe()
	if err != nil {
		conn.Close()
		return spec.CommandResult{}, err
	}
	go func() {
		_, _ = io.Copy(pw, os.Stdin)
		pw.Close()
	}()
	files := []*os.File{pr}
	req.Files = []string{"stdin"}
	for _, w := range []struct {
		name string
		w    io.Writer
	}{{"stdout", stdout}, {"stderr", stderr}} {
		if f, ok := w.w.(*os.File); ok {
			files = append(files, f)
			req.Files = append(req.Files, w.name)
		} else if !o.json && w.name == "stdout" {
			// A writer that is not a file (tests): no live stream.
			req.Live = false
		}
	}
	resp, err := serve.Do(ctx, conn, req, files)
	pr.Close()
	if err != nil {
		return spec.CommandResult{}, err
	}
	var res spec.CommandResult
	if resp.Result != nil {
		res = *resp.Result
	}
	if resp.Error != nil {
		return res, &serverError{kind: resp.Error.Kind, msg: resp.Error.Message, denials: resp.Error.Denials}
	}
	if !req.Live && !o.json {
		// No live stream reached stdout: print what was captured.
		_, _ = stdout.Write([]byte(res.Stdout.Text()))
		_, _ = stderr.Write([]byte(res.Stderr.Text()))
	}
	return res, nil
}

// serverRefusal is err as the server reports it (the {"error": {...}} object
// of `run --json`, with kind "cancelled" for a run its client ended).
func serverRefusal(res spec.CommandResult, err error) *serve.Refusal {
	var ee *exitError
	mapped := refused(ExitConfine, err)
	if res.RunID != "" {
		mapped = runError(res, err)
	}
	errors.As(mapped, &ee)
	r := refusalObject(mapped, ee.code, ee.msg)
	if errors.Is(err, context.Canceled) && res.Cancelled {
		r.Kind = "cancelled"
	}
	return &r
}

// serveHandler runs a request through the library as `confine run` does
// (runOpts.execute), with the caller's environment, descriptors and
// working directory taken from the request, never the server's.
//
// With requireCap, a request without a capability token is refused; no
// run it starts may reach the control paths (the server's own socket
// directory).
func serveHandler(warm *confine.Warm, requireCap bool, control ...string) serve.Handler {
	return func(ctx context.Context, req *serve.Request, files serve.Files) serve.Response {
		return handleRequest(ctx, req, files, warm, requireCap, control)
	}
}

func handleRequest(ctx context.Context, req *serve.Request, files serve.Files, warm *confine.Warm, requireCap bool, control []string) serve.Response {
	o, p, callerEnv, err := fromRequest(req)
	if err != nil {
		return serve.Response{Error: serverRefusal(spec.CommandResult{}, err)}
	}
	o.control, o.warm = control, warm
	o.requireCap = requireCap
	var stdin io.Reader
	if files.Stdin != nil {
		stdin = files.Stdin
	}
	var stdout, stderr io.Writer = io.Discard, io.Discard
	// Out and Err bound how long a client may leave its output unread.
	if files.Out != nil {
		stdout = files.Out
	}
	if files.Err != nil {
		stderr = files.Err
	}
	if req.Live && files.Stdout == nil {
		o.json = true
	}
	res, err := o.execute(ctx, p, stdin, stdout, stderr, callerEnv)
	resp := serve.Response{}
	if res.RunID != "" {
		resp.Result = &res
	}
	if err != nil {
		resp.Error = serverRefusal(res, err)
	}
	return resp
}

// fromRequest rebuilds the CLI's options and prepared run from a request:
// relative paths are the caller's (req.Cwd), the profile is resolved here
// (a recipe asks its toolchain in the server's environment), and a spec
// sent without Env (the Python client) gets the environment `confine run`
// would build from the caller's.
func fromRequest(req *serve.Request) (*runOpts, *prepared, func(string) (string, bool), error) {
	abs := func(what, p string) (string, error) {
		if p == "" || filepath.IsAbs(p) {
			return p, nil
		}
		if !filepath.IsAbs(req.Cwd) {
			return "", fmt.Errorf("%w: %s %q is relative and the request has no absolute cwd", spec.ErrInvalidSpec, what, p)
		}
		return filepath.Join(req.Cwd, p), nil
	}
	s := req.Spec
	var err error
	if s.Worktree, err = abs("worktree", s.Worktree); err != nil {
		return nil, nil, nil, err
	}
	if s.Dir, err = abs("dir", s.Dir); err != nil {
		return nil, nil, nil, err
	}
	for _, l := range [][]string{s.ReadOnly, s.ReadWrite} {
		for i := range l {
			if l[i], err = abs("root", l[i]); err != nil {
				return nil, nil, nil, err
			}
		}
	}
	o := &runOpts{backend: req.Backend, capToken: req.CapToken, json: !req.Live, approvals: s.Approvals}
	if o.capKey, err = abs("cap_key", req.CapKey); err != nil {
		return nil, nil, nil, err
	}
	if req.LiveLimit > 0 {
		o.liveLimitSet, o.limits.OutputBytes = true, req.LiveLimit
	}
	profile := req.Profile
	if profile == "" {
		profile = "default"
	}
	if strings.Contains(profile, "/") {
		if profile, err = abs("profile", profile); err != nil {
			return nil, nil, nil, err
		}
	}
	resolve := policy.ResolveProfile
	if req.Environ != nil {
		// A recipe asks its toolchain in the caller's environment.
		o.environ = req.Environ
		resolve = func(p string) (policy.Profile, error) { return policy.ResolveProfileIn(p, req.Environ) }
	}
	prof, err := resolve(profile)
	if err != nil {
		return nil, nil, nil, err
	}
	if s.Profile == "" {
		s.Profile = prof.Name
	}
	if s.Network == "" {
		s.Network = prof.Network
	}
	p := &prepared{spec: s, prof: prof}
	if p.logPath, err = abs("event_log", req.EventLog); err != nil {
		return nil, nil, nil, err
	}
	callerEnv := func(name string) (string, bool) {
		v, ok := req.CallerEnv[name]
		return v, ok
	}
	if req.Environ != nil {
		callerEnv = func(name string) (string, bool) { return lookupIn(req.Environ, name) }
		if s.Env == nil {
			env, _, err := buildEnvFrom(prof, req.EnvFlags, req.Environ)
			if err != nil {
				var ce *causedExit
				if errors.As(err, &ce) {
					return nil, nil, nil, ce.cause
				}
				return nil, nil, nil, err
			}
			p.spec.Env = env
		}
	}
	return o, p, callerEnv, nil
}

func newServe(stderr io.Writer) *cobra.Command {
	var socket string
	var maxRuns, maxQueue int
	var requireCap bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run commands for `confine run --server` and the Python client, from a warm process on a unix socket",
		Long: `Serve run requests on a unix socket: a warm launcher for hosts that run many
commands. The socket is $XDG_RUNTIME_DIR/confine/serve.sock (without
XDG_RUNTIME_DIR: /tmp/confine-UID/serve.sock), mode 0600, in a directory of
this uid with mode 0700 (created when missing; --socket's must exist);
any other directory is refused. Every client's uid is checked
(SO_PEERCRED) and must be this process's; a client inside a confined run,
or supervising one, is refused (docs/control-plane.md), and no run it
starts may have the socket's directory in a writable root. A run goes
through the same
library path as "confine run", with the caller's environment values,
PATH, working directory and descriptors, never the server's; a client
that hangs up ends its run (the whole tree). At most --max-runs run at
once; up to --max-queue more wait for a slot; beyond that a request is
refused as busy. With --require-cap (or $CONFINE_REQUIRE_CAP=1 in the
server's environment) a request without a valid capability token is
refused. SIGINT or SIGTERM stops the server, ending the runs in flight.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			// A client's stdout or stderr, passed to us, may land on fd
			// 1 or 2 here (when ours were closed): a reader gone there
			// must be an EPIPE for that run, not SIGPIPE for the server.
			// (Notify, not Ignore: an ignored signal would stay ignored
			// in the commands.)
			pipes := make(chan os.Signal, 1)
			signal.Notify(pipes, syscall.SIGPIPE)
			defer signal.Stop(pipes)
			s := &serve.Server{Socket: socket, MaxRuns: maxRuns, MaxQueue: maxQueue,
				Log: slog.New(slog.NewTextHandler(stderr, nil))}
			ln, err := s.Listen()
			if err != nil {
				return confineFailed(err)
			}
			if socket == "" {
				// The default directory is the server's own: removed when
				// empty at exit, so a work directory holding it (/tmp) is
				// refused only while a server may listen there.
				defer os.Remove(filepath.Dir(s.Socket))
			}
			// The socket's directory is known once Listen resolved it.
			// What the runs share: private directories made ahead.
			warm := confine.NewWarm()
			defer warm.Close()
			s.Handler = serveHandler(warm, requireCap || requireCapEnv(os.Getenv), filepath.Dir(s.Socket))
			serve.SetProcessMemoryLimit()
			fmt.Fprintf(stderr, "confine: serving uid %d at %s\n", os.Geteuid(), esc.Text(s.Socket))
			if err := s.Serve(ctx, ln); err != nil {
				return confineFailed(err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&socket, "socket", "", "socket path (its directory must be this uid's, mode 0700)")
	f.IntVar(&maxRuns, "max-runs", 0, "runs at once (default twice the CPUs)")
	f.BoolVar(&requireCap, "require-cap", false, "refuse requests without a valid capability token (also $"+RequireCapEnv+"=1)")
	f.IntVar(&maxQueue, "max-queue", 0, "requests that may wait for a run slot before more are refused as busy (default 256)")
	return cmd
}
