//go:build linux

package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/hostop/git"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// The tools' arguments. Every field is what the operation is about; none
// names a root, a profile, a waiver, an allowlist entry or a backend, and
// the schemas refuse fields they do not list.
type (
	ReadFileArgs struct {
		Path  string `json:"path" jsonschema:"file path relative to the root"`
		Limit int64  `json:"limit,omitempty" jsonschema:"bytes returned at most, half head and half tail (default 1MiB)"`
	}
	ListArgs struct {
		Path  string `json:"path,omitempty" jsonschema:"directory relative to the root (default: the root)"`
		Limit int    `json:"limit,omitempty" jsonschema:"entries listed at most (default 10000)"`
	}
	SearchArgs struct {
		Pattern    string `json:"pattern" jsonschema:"RE2 regular expression, ^ and $ at line boundaries"`
		Path       string `json:"path,omitempty" jsonschema:"file or directory relative to the root (default: the root)"`
		MaxMatches int    `json:"max_matches,omitempty" jsonschema:"matching lines returned at most (default 1000)"`
	}
	ApplyPatchArgs struct {
		Patch string `json:"patch" jsonschema:"unified diff, paths relative to the root; applied all or nothing"`
	}
	WriteFileArgs struct {
		Path    string `json:"path" jsonschema:"file path relative to the root"`
		Content string `json:"content" jsonschema:"the file's new content"`
	}
	GitStatusArgs struct{}
	GitDiffArgs   struct {
		Cached bool     `json:"cached,omitempty" jsonschema:"the staged changes (index against HEAD)"`
		Paths  []string `json:"paths,omitempty" jsonschema:"limit to these paths, relative to the root"`
	}
	GitLogArgs struct {
		MaxCount int    `json:"max_count,omitempty" jsonschema:"commits shown at most (default 20)"`
		Rev      string `json:"rev,omitempty" jsonschema:"revision to start from (default HEAD)"`
	}
	RunCommandArgs struct {
		Argv           []string          `json:"argv" jsonschema:"program and its arguments; the program is looked up in the run's PATH"`
		Cwd            string            `json:"cwd,omitempty" jsonschema:"working directory relative to the root (default: the root)"`
		Stdin          string            `json:"stdin,omitempty" jsonschema:"standard input"`
		TimeoutSeconds float64           `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit, at most the operator's"`
		Env            map[string]string `json:"env,omitempty" jsonschema:"variables to set; only names the operator allowed"`
		Approvals      []string          `json:"approvals,omitempty" jsonschema:"grant tokens from 'confine approve' for connections this session was refused"`
	}
)

// tier1Ops is each Tier 1 tool's host operation: a tool is served only
// when the operator's Tier 1 profile allows its operation (host-readonly
// serves no write_file or apply_patch), so a client never sees a tool
// that every call would be refused; a call to one is an unknown tool.
var tier1Ops = map[string]policy.HostOp{
	"read_file": policy.OpReadFile, "list": policy.OpList, "search": policy.OpSearch,
	"apply_patch": policy.OpApplyPatch, "write_file": policy.OpWriteFile,
	"git_status": policy.OpGitRead, "git_diff": policy.OpGitRead, "git_log": policy.OpGitRead,
}

// addTool adds a Tier 1 tool when the operator's profile allows it.
func addTool[In any](s *Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, any]) {
	op, ok := tier1Ops[t.Name]
	if !ok || !s.cfg.Host.Allows(op) {
		return
	}
	mcp.AddTool(s.srv, t, h)
}

func (s *Server) addTier1() {
	addTool(s, &mcp.Tool{Name: "read_file", Description: "Read a file beneath the root (bounded: head and tail)",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, a ReadFileArgs) (*mcp.CallToolResult, any, error) {
			res, err := s.host(ctx, req).ReadFile(a.Path, a.Limit)
			if err != nil {
				return errorResult(err)
			}
			return textResult(res.Content.Text(), res)
		})
	addTool(s, &mcp.Tool{Name: "list", Description: "List a directory beneath the root without following its entries",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, a ListArgs) (*mcp.CallToolResult, any, error) {
			res, err := s.host(ctx, req).List(dot(a.Path), a.Limit)
			if err != nil {
				return errorResult(err)
			}
			return textResult(listText(res), res)
		})
	addTool(s, &mcp.Tool{Name: "search", Description: "Search files beneath the root for a regular expression (skips .git and binaries)",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, a SearchArgs) (*mcp.CallToolResult, any, error) {
			res, err := s.host(ctx, req).Search(ctx, dot(a.Path), a.Pattern, hostop.SearchOptions{MaxMatches: a.MaxMatches})
			if err != nil {
				return errorResult(err)
			}
			return textResult(searchText(res), res)
		})
	addTool(s, &mcp.Tool{Name: "apply_patch", Description: "Apply a unified diff to files beneath the root, all or nothing"},
		func(ctx context.Context, req *mcp.CallToolRequest, a ApplyPatchArgs) (*mcp.CallToolResult, any, error) {
			res, err := s.host(ctx, req).ApplyPatch([]byte(a.Patch), 0)
			if err != nil {
				return errorResult(err)
			}
			var b strings.Builder
			for _, f := range res.Files {
				fmt.Fprintf(&b, "%s %s\n", f.Action, f.Path)
			}
			return textResult(b.String(), res)
		})
	addTool(s, &mcp.Tool{Name: "write_file", Description: "Replace (or create) a file beneath the root, atomically"},
		func(ctx context.Context, req *mcp.CallToolRequest, a WriteFileArgs) (*mcp.CallToolResult, any, error) {
			res, err := s.host(ctx, req).WriteFile(a.Path, []byte(a.Content), hostop.WriteOptions{})
			if err != nil {
				return errorResult(err)
			}
			return textResult(fmt.Sprintf("wrote %d bytes to %s", res.Bytes, res.Path), res)
		})
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	addTool(s, &mcp.Tool{Name: "git_status", Description: "git status of the repository at the root (runs no hook or configured program)", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, _ GitStatusArgs) (*mcp.CallToolResult, any, error) {
			return s.gitTool(func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Status(ctx) })(ctx, req)
		})
	addTool(s, &mcp.Tool{Name: "git_diff", Description: "git diff of the repository at the root: work tree against the index, or the index against HEAD", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, a GitDiffArgs) (*mcp.CallToolResult, any, error) {
			return s.gitTool(func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Diff(ctx, a.Cached, a.Paths...) })(ctx, req)
		})
	addTool(s, &mcp.Tool{Name: "git_log", Description: "The last commits of the repository at the root", Annotations: ro},
		func(ctx context.Context, req *mcp.CallToolRequest, a GitLogArgs) (*mcp.CallToolResult, any, error) {
			n := a.MaxCount
			if n <= 0 {
				n = 20
			}
			return s.gitTool(func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Log(ctx, n, a.Rev) })(ctx, req)
		})
}

// gitTool is the handler of a git tool that runs f on the repository at
// the root: git's output as text, a git failure as an error result that
// keeps the output.
func (s *Server) gitTool(f func(ctx context.Context, r *git.Repo) (git.Result, error)) func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, any, error) {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, any, error) {
		res, err := f(ctx, git.New(s.host(ctx, req)))
		if err != nil && !errors.Is(err, git.ErrGit) {
			return errorResult(err)
		}
		var b strings.Builder
		switch {
		case res.Subcommand == "status" && err == nil:
			for _, e := range res.Status {
				fmt.Fprintf(&b, "%s%s %s\n", e.X, e.Y, e.Path)
			}
			if len(res.Status) == 0 {
				b.WriteString("clean\n")
			}
		case res.Subcommand == "log" && err == nil:
			for _, e := range res.Log {
				fmt.Fprintf(&b, "%.12s %s\n", e.Hash, e.Subject)
			}
		default:
			b.WriteString(res.Stdout.Text())
		}
		if err != nil {
			b.WriteString(res.Stderr.Text())
			r, _, _ := textResult(b.String(), nil)
			r.IsError = true
			return r, map[string]any{"result": res, "error": map[string]string{"kind": "git", "message": err.Error()}}, nil
		}
		return textResult(b.String(), res)
	}
}

// listText is a listing as text, one entry a line.
func listText(res hostop.ListResult) string {
	var b strings.Builder
	for _, e := range res.Entries {
		fmt.Fprintf(&b, "%-8s %10d %s", e.Type, e.Size, e.Name)
		if e.Target != "" {
			fmt.Fprintf(&b, " -> %s", e.Target)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// searchText is a search's matches as text, grep's way.
func searchText(res hostop.SearchResult) string {
	var b strings.Builder
	for _, m := range res.Matches {
		fmt.Fprintf(&b, "%s:%d:%s\n", m.Path, m.Line, m.Text)
	}
	if len(res.Matches) == 0 {
		b.WriteString("no match\n")
	}
	if res.Truncated {
		b.WriteString("(search stopped at its bound)\n")
	}
	return b.String()
}

func dot(p string) string {
	if p == "" {
		return "."
	}
	return p
}

// RunOutput is run_command's structured result.
type RunOutput struct {
	RunID     string      `json:"run_id"`
	Backend   string      `json:"backend"`
	ExitCode  int         `json:"exit_code"`
	Signal    int         `json:"signal"`
	TimedOut  bool        `json:"timed_out"`
	Cancelled bool        `json:"cancelled"`
	Duration  float64     `json:"duration_seconds"`
	Stdout    spec.Stream `json:"stdout"`
	Stderr    spec.Stream `json:"stderr"`
	// Denials are the operations the sandbox refused in user space.
	Denials []spec.Denial `json:"denials"`
	// Connections are the egress proxy's records (allowlist profiles).
	Connections []spec.Connection `json:"connections"`
	// Approvals are the refused connections a human may grant.
	Approvals   []ApprovalRequest  `json:"approval_requests,omitempty"`
	Persistence []spec.Persistence `json:"persistence,omitempty"`
	TaskID      string             `json:"task_id"`
	JobID       string             `json:"job_id"`
}

// ApprovalRequest is a refused connection and how a human grants it: the
// grant is signed with the operator's capability key, and the agent
// passes the token in run_command's approvals.
type ApprovalRequest struct {
	Request string `json:"request"`
	Host    string `json:"host"`
	Port    int    `json:"port"`
	Approve string `json:"approve"`
	// Granted: the user answered the server's elicitation with a valid
	// grant, which every later run of this session carries.
	Granted bool `json:"granted,omitempty"`
}

// grantSchema is what the elicitation asks the user for.
var grantSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"token": map[string]any{"type": "string", "title": "grant token", "description": "the token `confine approve` printed"},
	},
	"required": []string{"token"},
}

// approvalInputs asks the user, where the client supports elicitation,
// to grant each refused connection: the call returns input requests (an
// elicitation per request) with the run's result as its state, and the
// SDK (or, at newer protocol versions, the client) asks and calls again
// with the answers; see grantAnswers. Nil when there is nothing to ask.
func (s *Server) approvalInputs(req *mcp.CallToolRequest, out RunOutput) *mcp.CallToolResult {
	if len(out.Approvals) == 0 || req.Session == nil {
		return nil
	}
	ip := req.Session.InitializeParams()
	if ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return nil
	}
	state, err := json.Marshal(out)
	if err != nil {
		return nil
	}
	in := mcp.InputRequestMap{}
	for i, a := range out.Approvals {
		in["grant-"+strconv.Itoa(i)] = &mcp.ElicitParams{
			Message: fmt.Sprintf("A confined command was refused a connection to %s:%d (approval request %s). "+
				"To allow it for this session, run\n  %s\nand paste the token it prints.", a.Host, a.Port, a.Request, a.Approve),
			RequestedSchema: grantSchema,
		}
	}
	return &mcp.CallToolResult{InputRequests: in, RequestState: string(state)}
}

// grantAnswers finishes a call whose approval requests were put to the
// user: each accepted token that the run capability verifies for this
// session (signed with the operator's key, for this task) is kept for the
// session's later runs. The run is not repeated; the result is the run's,
// from the state, with the granted requests marked.
func (s *Server) grantAnswers(ctx context.Context, req *mcp.CallToolRequest, task, job string) (*mcp.CallToolResult, any, error) {
	var out RunOutput
	if err := json.Unmarshal([]byte(req.Params.RequestState), &out); err != nil {
		err = fmt.Errorf("%w: approval answers without the run's state: %w", ErrRefused, err)
		s.record(ctx, task, job, []string{"run_command", "grant"}, err)
		return errorResult(err)
	}
	out.TaskID, out.JobID = task, job
	var granted []string
	for i := range out.Approvals {
		out.Approvals[i].Granted = false
		res, ok := req.Params.InputResponses["grant-"+strconv.Itoa(i)].(*mcp.ElicitResult)
		if !ok || res.Action != "accept" {
			continue
		}
		tok, _ := res.Content["token"].(string)
		tok = strings.TrimSpace(tok)
		gs, err := policy.VerifyGrants(s.cfg.RunCap, []string{tok}, task)
		if tok == "" || err != nil {
			continue
		}
		s.keepGrant(req.Session, task, tok)
		out.Approvals[i].Granted = true
		granted = append(granted, gs[0].ID)
	}
	if !recorded(ctx) {
		s.record(ctx, task, job, append([]string{"run_command", "grant"}, granted...), nil)
	}
	r, v, _ := textResult(s.summary(out, nil), out)
	r.IsError = out.ExitCode != 0 || out.Signal != 0 || out.TimedOut
	return r, v, nil
}

// keepGrant keeps a verified grant for the session's later runs, until
// the session ends (the client closed it, its HTTP session was deleted or
// went idle, the stdio peer went away): the first grant of a session
// starts the one goroutine that waits for its end and drops its grants.
func (s *Server) keepGrant(ss *mcp.ServerSession, task, tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := len(s.grants[task]) == 0
	if !slices.Contains(s.grants[task], tok) {
		s.grants[task] = append(s.grants[task], tok)
	}
	if first && ss != nil {
		go func() {
			_ = ss.Wait()
			s.mu.Lock()
			delete(s.grants, task)
			s.mu.Unlock()
		}()
	}
}

func (s *Server) sessionGrants(task string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.grants[task])
}

func (s *Server) addRun() {
	prof := s.cfg.RunProfile
	desc := fmt.Sprintf("Run a command confined by confine under the operator's profile %q (tier %d), working directory beneath the root; "+
		"output streams as progress notifications; cancelling the call ends the command's whole process tree", prof.Name, prof.Tier)
	mcp.AddTool(s.srv, &mcp.Tool{Name: "run_command", Description: desc},
		func(ctx context.Context, req *mcp.CallToolRequest, a RunCommandArgs) (*mcp.CallToolResult, any, error) {
			task, job := sessionID(req), requestID(req)
			if len(req.Params.InputResponses) > 0 {
				return s.grantAnswers(ctx, req, task, job)
			}
			sp, err := s.runSpec(a, task, job)
			if err != nil {
				s.record(ctx, task, job, a.Argv, err)
				return errorResult(err)
			}
			markRecorded(ctx) // the launcher records the run, or its refusal
			l := s.launcher()
			if tok := req.Params.GetProgressToken(); tok != nil {
				if req.Session != nil {
					p := &progress{ctx: ctx, ss: req.Session, token: tok}
					l.LiveStdout, l.LiveStderr = progressStream{p, "stdout"}, progressStream{p, "stderr"}
					// Live output is bounded like the kept output.
					l.LiveLimit = sp.Limits.OutputBytes
					if l.LiveLimit <= 0 {
						l.LiveLimit = spec.DefaultLimits().OutputBytes
					}
				}
			}
			cr, err := l.RunCommand(ctx, s.cfg.RunCap, sp)
			if err != nil && cr.RunID == "" {
				return errorResult(err)
			}
			out := s.runOutput(cr, task, job)
			if ask := s.approvalInputs(req, out); ask != nil {
				return ask, nil, nil
			}
			sum := s.summary(out, err)
			r, v, _ := textResult(sum, out)
			r.IsError = err != nil || out.ExitCode != 0 || out.Signal != 0 || out.TimedOut
			return r, v, nil
		})
}

// runSpec builds the run from the operator's configuration and the call's
// arguments, refusing what the call may not ask for.
func (s *Server) runSpec(a RunCommandArgs, task, job string) (spec.CommandSpec, error) {
	if len(a.Argv) == 0 || a.Argv[0] == "" {
		return spec.CommandSpec{}, fmt.Errorf("%w: argv needs a program", ErrRefused)
	}
	root := s.cfg.Host.Root()
	rel := dot(a.Cwd)
	p, err := root.ReadPath(rel)
	if err != nil {
		return spec.CommandSpec{}, fmt.Errorf("cwd: %w", err)
	}
	// The kernel resolves it beneath the root: a symlink out is refused.
	// (The directory is where the command starts, never a grant.)
	if _, err := hostop.List(p, 1); err != nil {
		return spec.CommandSpec{}, fmt.Errorf("cwd: %w", err)
	}
	lim := s.cfg.Limits
	if a.TimeoutSeconds < 0 {
		return spec.CommandSpec{}, fmt.Errorf("%w: negative timeout", ErrRefused)
	}
	if a.TimeoutSeconds > 0 {
		d := time.Duration(a.TimeoutSeconds * float64(time.Second))
		if d > s.maxTimeout() {
			return spec.CommandSpec{}, fmt.Errorf("%w: timeout %s is above the operator's %s", ErrRefused, d, s.maxTimeout())
		}
		lim.WallTime = d
	}
	env, err := s.runEnv(a.Env)
	if err != nil {
		return spec.CommandSpec{}, err
	}
	sp := spec.CommandSpec{
		Program:   a.Argv[0],
		Args:      a.Argv[1:],
		Worktree:  root.Path(),
		Dir:       filepath.Join(root.Path(), p.Rel()),
		Env:       env,
		ReadOnly:  s.cfg.ReadOnly,
		ReadWrite: s.cfg.ReadWrite,
		Profile:   s.cfg.RunProfile.Name,
		Limits:    lim,
		Network:   s.cfg.RunProfile.Network,
		Stdin:     []byte(a.Stdin),
		TaskID:    task,
		JobID:     job,
		Approvals: append(slices.Clone(a.Approvals), s.sessionGrants(task)...),
	}
	return sp, nil
}

// runEnv is the operator's environment with the call's variables, each
// named by the operator, all through the profile's sanitiser again.
func (s *Server) runEnv(set map[string]string) ([]string, error) {
	if len(set) == 0 {
		return s.cfg.Env, nil
	}
	env := slices.Clone(s.cfg.Env)
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		if !slices.Contains(s.cfg.AgentEnv, n) {
			return nil, fmt.Errorf("%w: env %s: not a variable the operator lets a call set (confine mcp --agent-env)", ErrRefused, n)
		}
		env = append(env, n+"="+set[n])
	}
	out, skipped, err := policy.BuildEnv(policy.EnvSources{Set: env, Waive: s.cfg.RunProfile.Env.Waive})
	if err != nil {
		return nil, fmt.Errorf("%w: env: %w", ErrRefused, err)
	}
	if len(skipped) > 0 {
		return nil, fmt.Errorf("%w: env: %s refused by the sanitiser", ErrRefused, strings.Join(skipped, ", "))
	}
	return out, nil
}

func (s *Server) runOutput(cr spec.CommandResult, task, job string) RunOutput {
	out := RunOutput{
		RunID: cr.RunID, Backend: cr.Backend, ExitCode: cr.ExitCode, Signal: cr.Signal,
		TimedOut: cr.TimedOut, Cancelled: cr.Cancelled, Duration: cr.Duration.Seconds(),
		Stdout: cr.Stdout, Stderr: cr.Stderr, Denials: cr.Denials, Connections: cr.Connections,
		Persistence: cr.Persistence, TaskID: task, JobID: job,
	}
	if out.Denials == nil {
		out.Denials = []spec.Denial{}
	}
	if out.Connections == nil {
		out.Connections = []spec.Connection{}
	}
	for _, c := range cr.Connections {
		if c.ApprovalRequest == "" {
			continue
		}
		out.Approvals = append(out.Approvals, ApprovalRequest{Request: c.ApprovalRequest, Host: c.Domain, Port: c.Port,
			Approve: strings.ReplaceAll(s.cfg.ApproveHint, "REQUEST_ID", c.ApprovalRequest)})
	}
	return out
}

// summary is the text a model reads.
func (s *Server) summary(o RunOutput, err error) string {
	var b strings.Builder
	switch {
	case o.TimedOut:
		fmt.Fprintf(&b, "timed out; the command's process tree was ended")
	case o.Cancelled:
		fmt.Fprintf(&b, "cancelled; the command's process tree was ended")
	case o.Signal != 0:
		fmt.Fprintf(&b, "killed by signal %d", o.Signal)
	default:
		fmt.Fprintf(&b, "exit %d", o.ExitCode)
	}
	fmt.Fprintf(&b, " (backend %s, %.2fs, run %s)\n", o.Backend, o.Duration, o.RunID)
	if err != nil {
		fmt.Fprintf(&b, "confine: %v\n", err)
	}
	for _, st := range []struct {
		name string
		s    spec.Stream
	}{{"stdout", o.Stdout}, {"stderr", o.Stderr}} {
		if st.s.Total > 0 {
			fmt.Fprintf(&b, "--- %s (%d bytes) ---\n%s\n", st.name, st.s.Total, strings.TrimRight(st.s.Text(), "\n"))
		}
	}
	for i, d := range o.Denials {
		if i == 10 {
			fmt.Fprintf(&b, "... and %d more denials\n", len(o.Denials)-10)
			break
		}
		fmt.Fprintf(&b, "denied %s %s: %s (%s)\n", d.Syscall, d.Path, d.Reason, d.Errno)
	}
	for _, a := range o.Approvals {
		if a.Granted {
			fmt.Fprintf(&b, "connection to %s:%d refused (approval request %s); the user granted it for this session: call run_command again.\n", a.Host, a.Port, a.Request)
			continue
		}
		fmt.Fprintf(&b, "connection to %s:%d refused (approval request %s). A human may grant it with:\n  %s\n"+
			"then call run_command again in this session with the printed token in \"approvals\".\n", a.Host, a.Port, a.Request, a.Approve)
	}
	for _, c := range o.Persistence {
		fmt.Fprintf(&b, "the command %s %s (%s), which a program outside the sandbox may run later\n", c.Kind, c.Path, c.What)
	}
	return b.String()
}
