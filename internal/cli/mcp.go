//go:build linux

package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/esc"
	"github.com/confine-sandbox/confine/internal/mcpserver/mcpconfig"
	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// mcpOpts are `confine mcp`'s flags: everything that decides what a tool
// call may reach is here, fixed when the server starts.
type mcpOpts struct {
	root, profile, hostProfile, backend string
	capKey, eventLog                    string
	ro, rw, env, agentEnv               []string
	limits                              spec.Limits
	noRun                               bool
	// listen is the unix socket of the streamable HTTP transport ("":
	// stdio); tokenFile holds its bearer token.
	listen, tokenFile string
}

// MCPServer is a configured MCP server (package mcpserver's Server).
type MCPServer interface {
	// RunStdio serves one client on standard input and output.
	RunStdio(ctx context.Context) error
	// HTTPHandler is the streamable HTTP transport behind token.
	HTTPHandler(token string) (http.Handler, error)
}

// NewMCPServer builds `confine mcp`'s server. A main that links the MCP
// SDK sets it (cmd/confine-mcp, package mcpserver's tests); the confine
// binary leaves it nil, so that the SDK's package initialisation and
// size cost no run (docs/performance-launch.md), and its `confine mcp`
// executes confine-mcp instead.
var NewMCPServer func(mcpconfig.Config) (MCPServer, error)

// MCPBinary is the program `confine mcp` executes when this binary has no
// MCP server: looked up beside the running executable, then in PATH.
const MCPBinary = "confine-mcp"

// execMCP replaces this process with MCPBinary, passing args (this
// process's command line, as Main was given it) on: the same process,
// standard streams and environment.
func execMCP(args []string) error {
	path := ""
	if self, err := os.Executable(); err == nil {
		if p := filepath.Join(filepath.Dir(self), MCPBinary); unix.Access(p, unix.X_OK) == nil {
			path = p
		}
	}
	if path == "" {
		p, err := exec.LookPath(MCPBinary)
		if err != nil {
			return &exitError{ExitConfine, fmt.Sprintf("mcp: this confine binary has no MCP server and %s is neither beside it nor in PATH "+
				"(build it: CGO_ENABLED=0 go build -o %s ./cmd/confine-mcp)", MCPBinary, MCPBinary)}
		}
		path = p
	}
	err := syscall.Exec(path, append([]string{MCPBinary}, args...), os.Environ())
	return &exitError{ExitConfine, fmt.Sprintf("mcp: exec %s: %v", path, err)}
}

func newMCP(stderr io.Writer) *cobra.Command {
	o := &mcpOpts{}
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve the Tier 1 operations and confined runs as MCP tools over stdio",
		Long: `An MCP (Model Context Protocol) server on standard input and output. Tools:
read_file, list, search, apply_patch, write_file, git_status, git_diff, git_log
(Tier 1, on paths confined to --root) and run_command (Tier 2, under --profile,
with --ro/--rw/--env/--backend and the bounds given here). A tool call passes
only paths beneath the root, an argv, a working directory beneath the root,
stdin, a timeout up to --timeout and the variables named by --agent-env: it
can add no root, waiver or allowlist entry. Every call is one event-log
record (task id: the MCP session, job id: the request id). See docs/mcp.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if NewMCPServer == nil {
				return execMCP(os.Args[1:])
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			srv, closeFn, err := o.server(stderr)
			if err != nil {
				return refused(ExitConfine, err)
			}
			defer closeFn()
			if o.listen != "" {
				return o.serveHTTP(ctx, srv, stderr)
			}
			if err := srv.RunStdio(ctx); err != nil && !errors.Is(err, context.Canceled) {
				return &exitError{ExitConfine, "mcp: " + err.Error()}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.root, "root", "", "the directory every tool works beneath, the runs' work directory (default: current directory)")
	f.StringVar(&o.profile, "profile", "default", "run_command's sandbox profile: a built-in name or a TOML file path")
	f.StringVar(&o.hostProfile, "host-profile", "host", "the Tier 1 tools' profile: host, host-readonly, or a TOML file with tier = 1")
	f.StringVar(&o.backend, "backend", "auto", "run_command's backend: auto, namespaces, core, bwrap")
	f.StringArrayVar(&o.ro, "ro", nil, "extra read+execute root of every run (repeatable)")
	f.StringArrayVar(&o.rw, "rw", nil, "extra writable root of every run (repeatable)")
	f.StringArrayVar(&o.env, "env", nil, "pass NAME from this environment, or set NAME=VALUE, in every run (repeatable)")
	f.StringArrayVar(&o.agentEnv, "agent-env", nil, "a variable NAME a run_command call may set (repeatable; values still pass the sanitiser)")
	f.StringVar(&o.capKey, "cap-key", "", "key file that verifies approval grants (default $XDG_CONFIG_HOME/confine/cap.key, used when it exists)")
	f.StringVar(&o.eventLog, "event-log", "", "JSON-lines event log (default $CONFINE_EVENT_LOG, else $XDG_STATE_HOME/confine/events.jsonl; \"off\" disables)")
	f.Var(durFlag{&o.limits.WallTime}, "timeout", "wall-clock limit of a run, and the longest a call may ask for (default 10m)")
	f.Var(sizeFlag{&o.limits.OutputBytes}, "output-limit", "bytes kept per output stream of a run, head and tail (default 1MiB)")
	f.Var(sizeFlag{&o.limits.MemoryBytes}, "memory", "address-space limit per process of a run (default 8GiB)")
	f.BoolVar(&o.noRun, "no-run", false, "serve the Tier 1 tools only (no run_command)")
	f.StringVar(&o.listen, "listen", "", "serve streamable HTTP on this unix socket (mode 0600) instead of stdio; needs --token-file")
	f.StringVar(&o.tokenFile, "token-file", "", "with --listen: the bearer token clients must send (a new random one is written, mode 0600, when the file is missing)")
	return cmd
}

// server builds the MCP server from the flags; closeFn releases its root.
func (o *mcpOpts) server(stderr io.Writer) (MCPServer, func(), error) {
	hostFlags := &hostOpts{root: o.root, profile: o.hostProfile, eventLog: o.eventLog}
	h, err := hostFlags.host(stderr)
	if err != nil {
		return nil, nil, err
	}
	cfg := mcpconfig.Config{Host: h, Backend: o.backend, AgentEnv: o.agentEnv, Limits: o.limits}
	cfg.Version = versionString()
	fail := func(err error) (MCPServer, func(), error) {
		h.Close()
		return nil, nil, err
	}
	if !o.noRun {
		prof, err := policy.ResolveProfile(o.profile)
		if err != nil {
			return fail(err)
		}
		// Grants are verified with the capability key: the operator's,
		// when there is one.
		keyed := o.capKey != ""
		keyPath := o.capKey
		if !keyed {
			if keyPath, err = DefaultKeyPath(); err == nil {
				_, serr := os.Stat(keyPath)
				keyed = serr == nil
			}
		}
		eng, err := engineFor(prof, keyed, o.capKey)
		if err != nil {
			return fail(err)
		}
		c, err := eng.Mint(prof.Name, "mcp", 0)
		if err != nil {
			return fail(err)
		}
		if cfg.ReadOnly, err = absAll("--ro", o.ro); err != nil {
			return fail(err)
		}
		if cfg.ReadWrite, err = absAll("--rw", o.rw); err != nil {
			return fail(err)
		}
		env, skipped, err := buildEnv(prof, o.env)
		if err != nil {
			return fail(err)
		}
		if len(skipped) > 0 {
			fmt.Fprintf(stderr, "confine: environment: left out %s (refused by the sanitiser)\n", esc.Join(skipped, ", "))
		}
		cfg.RunCap, cfg.RunProfile, cfg.Env = c, prof, env
		// The key, the listening socket and its bearer token are this
		// server's control plane: no run may reach them.
		for _, p := range []string{keyPath, o.listen, o.tokenFile} {
			if a, err := filepath.Abs(p); err == nil && p != "" {
				cfg.ControlPaths = append(cfg.ControlPaths, a)
			}
		}
		cfg.ApproveHint = "confine approve REQUEST_ID"
		if h.EventLog != "" {
			cfg.ApproveHint += " --event-log " + h.EventLog
		}
		if keyed {
			cfg.ApproveHint += " --cap-key " + keyPath
		} else {
			cfg.ApproveHint += " (needs a capability key: `confine cap keygen`, then restart confine mcp so it verifies grants)"
		}
	}
	srv, err := NewMCPServer(cfg)
	if err != nil {
		return fail(err)
	}
	return srv, func() { h.Close() }, nil
}

// serveHTTP serves the streamable HTTP transport on the unix socket
// o.listen until ctx ends; every request needs the bearer token.
func (o *mcpOpts) serveHTTP(ctx context.Context, srv MCPServer, stderr io.Writer) error {
	if o.tokenFile == "" {
		return &exitError{ExitConfine, "--listen needs --token-file (the bearer token clients send)"}
	}
	token, err := mcpToken(o.tokenFile)
	if err != nil {
		return confineFailed(err)
	}
	h, err := srv.HTTPHandler(token)
	if err != nil {
		return confineFailed(err)
	}
	if st, err := os.Lstat(o.listen); err == nil {
		if st.Mode()&os.ModeSocket == 0 {
			return &exitError{ExitConfine, fmt.Sprintf("--listen %s: exists and is not a socket", o.listen)}
		}
		_ = os.Remove(o.listen) // a stale socket of an earlier server
	}
	// The socket is made listening and 0600 under another name, then
	// renamed into place: at its path it is never another mode, nor bound
	// and not yet listening (a client, or a test waiting for the path,
	// would be refused).
	tmp := filepath.Join(filepath.Dir(o.listen), "."+filepath.Base(o.listen)+".new")
	_ = os.Remove(tmp) // a leftover of an earlier server that died here
	uln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return &exitError{ExitConfine, fmt.Sprintf("--listen: %v", err)}
	}
	uln.SetUnlinkOnClose(false) // its name changes; removed below
	// A client inside a confined run is refused as by confine serve.
	ln := serve.PeerCheckedListener{UnixListener: uln, Refused: func(err error) {
		fmt.Fprintf(stderr, "confine: mcp: %v\n", err)
	}}
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return &exitError{ExitConfine, fmt.Sprintf("--listen: %v", err)}
	}
	if err := os.Rename(tmp, o.listen); err != nil {
		ln.Close()
		_ = os.Remove(tmp)
		return &exitError{ExitConfine, fmt.Sprintf("--listen: %v", err)}
	}
	defer os.Remove(o.listen)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(ln) }()
	fmt.Fprintf(stderr, "confine: mcp: serving streamable HTTP on %s\n", o.listen)
	select {
	case <-ctx.Done():
		// Closing the connections cancels the calls, which end their runs.
		_ = hs.Close()
		<-done
		return nil
	case err := <-done:
		return &exitError{ExitConfine, "mcp: " + err.Error()}
	}
}

// mcpToken reads the bearer token from path, or, when path is missing,
// writes a new random one there (mode 0600).
func mcpToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	var r [32]byte
	_, _ = rand.Read(r[:])
	tok := hex.EncodeToString(r[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	_, err = f.WriteString(tok + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return tok, nil
}
