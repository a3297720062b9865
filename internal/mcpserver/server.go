//go:build linux

// Package mcpserver is `confine mcp`: confine's Tier 1 host operations and
// its Tier 2 runs as Model Context Protocol tools, on the official Go SDK.
//
// The operator fixes everything that decides what a tool may reach when
// the server starts (Config): the root, the Tier 1 capability, the run
// profile, its extra roots, backend, environment and bounds. A tool call
// passes only what the operation is about: a path beneath the root, a
// patch, a pattern, an argv with a working directory beneath the root,
// stdin, a timeout within the operator's, variables the operator named.
// Every tool call is one event-log record whose task id is the MCP
// session and whose job id is the JSON-RPC request id. See docs/mcp.md.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	confine "github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/internal/cli"
	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/mcpserver/mcpconfig"
	"github.com/confine-sandbox/confine/spec"
)

// Config is what the operator fixes at server start (package mcpconfig,
// which the confine binary links without the MCP SDK).
type Config = mcpconfig.Config

// ErrRefused: a tool argument the server refuses before anything runs.
var ErrRefused = errors.New("refused by the MCP server")

// Server is a configured MCP server.
type Server struct {
	cfg Config
	srv *mcp.Server
	// grants are the approval tokens a user gave through elicitation,
	// by session; each was verified with the operator's key. A session's
	// are dropped when it ends (keepGrant).
	mu     sync.Mutex
	grants map[string][]string
	// idle ends an HTTP session that made no request for this long (its
	// grants with it); 0 is idleSession.
	idle time.Duration
}

// idleSession is how long an HTTP session may go without a request
// before the server ends it: a client that went away without ending its
// session (DELETE) would otherwise hold it, and its grants, as long as
// the server runs. A call in progress keeps its session.
const idleSession = 30 * time.Minute

// recordedKey marks, in a tool call's context, whether the call reached a
// layer that records it (hostop, the launcher or refuse).
type recordedKey struct{}

// New builds the server and its tools.
func New(cfg Config) (*Server, error) {
	if cfg.Host == nil {
		return nil, fmt.Errorf("mcp server: %w: no Tier 1 host", spec.ErrCapability)
	}
	if cfg.Version == "" {
		cfg.Version = "(devel)"
	}
	s := &Server{cfg: cfg, grants: map[string][]string{}}
	s.srv = mcp.NewServer(&mcp.Implementation{Name: "confine", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "confine: every path is relative to the root " + cfg.Host.Root().Path() +
			" and confined to it; run_command runs under the operator's profile " + cfg.RunProfile.Name + ".",
	})
	s.srv.AddReceivingMiddleware(s.auditMiddleware)
	s.addTier1()
	if cfg.RunCap != nil {
		s.addRun()
	}
	return s, nil
}

// MCP is the SDK server (for transports other than Run's).
func (s *Server) MCP() *mcp.Server { return s.srv }

// Run serves one client on t (stdio: &mcp.StdioTransport{}) until it
// disconnects or ctx ends.
func (s *Server) Run(ctx context.Context, t mcp.Transport) error {
	return s.srv.Run(ctx, idTransport{t})
}

// RunStdio serves one client on standard input and output until it
// disconnects or ctx ends.
func (s *Server) RunStdio(ctx context.Context) error {
	return s.Run(ctx, &mcp.StdioTransport{})
}

// auditMiddleware makes sure every tools/call is recorded once: a call the
// SDK refused before its handler ran (arguments that fail the schema, an
// unknown tool) is recorded here.
func (s *Server) auditMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "tools/call" {
			return next(ctx, method, req)
		}
		var recorded atomic.Bool
		ctx = context.WithValue(ctx, recordedKey{}, &recorded)
		res, err := next(ctx, method, req)
		if recorded.Load() {
			return res, err
		}
		why := ""
		if err != nil {
			why = err.Error()
		} else if r, ok := res.(*mcp.CallToolResult); ok && r.IsError {
			why = resultText(r)
		}
		name := ""
		var task, job string
		if ctr, ok := req.(*mcp.CallToolRequest); ok && ctr.Params != nil {
			name, task, job = ctr.Params.Name, sessionID(ctr), requestID(ctr)
		}
		s.record(ctx, task, job, []string{name}, errors.New(why))
		return res, err
	}
}

func resultText(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

func markRecorded(ctx context.Context) {
	if b, ok := ctx.Value(recordedKey{}).(*atomic.Bool); ok {
		b.Store(true)
	}
}

func sessionID(req *mcp.CallToolRequest) string {
	if req == nil || req.Session == nil {
		return ""
	}
	return req.Session.ID()
}

func recorded(ctx context.Context) bool {
	b, ok := ctx.Value(recordedKey{}).(*atomic.Bool)
	return ok && b.Load()
}

// record records a tool call that neither hostop nor the launcher did: one
// the server refused itself (err), or the answer to an approval request.
func (s *Server) record(ctx context.Context, task, job string, argv []string, err error) {
	markRecorded(ctx)
	h := s.cfg.Host
	if h.EventLog == "" {
		return
	}
	e := eventlog.Event{
		RunID:   eventlog.NewRunID(),
		Profile: s.cfg.RunProfile.Name,
		Tier:    int(s.cfg.RunProfile.Tier),
		Backend: "mcp",
		Argv:    argv,
		Dir:     h.Root().Path(),
		TaskID:  task,
		JobID:   job,
	}
	if err != nil {
		e.Error, e.ExitCode = err.Error(), 1
	}
	lg, lerr := eventlog.Open(h.EventLog, eventlog.DefaultMaxBytes, eventlog.DefaultKeep)
	if lerr == nil {
		lerr = lg.Record(e)
		if cerr := lg.Close(); lerr == nil {
			lerr = cerr
		}
	}
	if lerr != nil && h.EventLogError != nil {
		h.EventLogError(fmt.Errorf("event log %s: %w", h.EventLog, lerr))
	}
}

// host is the Tier 1 host for one call: the operator's, with the call's
// ids for its record.
func (s *Server) host(ctx context.Context, req *mcp.CallToolRequest) *hostop.Host {
	markRecorded(ctx)
	h := *s.cfg.Host
	h.TaskID, h.JobID = sessionID(req), requestID(req)
	return &h
}

// errorResult is a failed call: IsError, the error's kind and message as
// structured content, and the message as text.
func errorResult(err error) (*mcp.CallToolResult, any, error) {
	type errBody struct {
		Kind    string `json:"kind"`
		Message string `json:"message"`
	}
	kind := hostop.ErrorKind(err)
	if errors.Is(err, ErrRefused) && kind == "error" {
		kind = "refused"
	}
	r := &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "confine: " + err.Error()}}}
	return r, map[string]any{"error": errBody{kind, err.Error()}}, nil
}

// textResult is a successful call with its summary for models.
func textResult(summary string, out any) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: summary}}}, out, nil
}

// progress sends a run's live output as progress notifications: each
// notification's message is a chunk of output, its _meta names the
// stream, and its progress is the bytes sent so far.
type progress struct {
	ctx   context.Context
	ss    *mcp.ServerSession
	token any
	mu    sync.Mutex
	n     int64
}

// chunk bounds one notification's message.
const chunk = 8 << 10

type progressStream struct {
	p    *progress
	name string
}

func (w progressStream) Write(b []byte) (int, error) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	for rest := b; len(rest) > 0; {
		c := rest
		if len(c) > chunk {
			c = c[:chunk]
		}
		rest = rest[len(c):]
		p.n += int64(len(c))
		// A client gone away loses its progress, not the run.
		_ = p.ss.NotifyProgress(p.ctx, &mcp.ProgressNotificationParams{
			ProgressToken: p.token,
			Progress:      float64(p.n),
			Message:       string(c),
			Meta:          mcp.Meta{"stream": w.name},
		})
	}
	return len(b), nil
}

// launcher is a fresh launcher for one run (live output is per run).
func (s *Server) launcher() *confine.Launcher {
	h := s.cfg.Host
	return &confine.Launcher{EventLog: h.EventLog, EventLogError: h.EventLogError, Backend: s.cfg.Backend, ControlPaths: s.cfg.ControlPaths}
}

// maxTimeout is the longest timeout a call may ask for.
func (s *Server) maxTimeout() time.Duration {
	if s.cfg.Limits.WallTime > 0 {
		return s.cfg.Limits.WallTime
	}
	return spec.DefaultLimits().WallTime
}

// Register makes this server `confine mcp`'s (cli.NewMCPServer), for the
// mains that link it: cmd/confine-mcp and this package's tests.
func Register() {
	cli.NewMCPServer = func(c Config) (cli.MCPServer, error) { return New(c) }
}
