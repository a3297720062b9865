//go:build linux

package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// approveWorld is an allowlist profile that allows allowed.test and not
// denied.test (both served on loopback), the operator's key and a key
// that is not the operator's.
type approveWorld struct {
	f                   *fixture
	u                   testutil.User
	prof, key, otherKey string
	ca, port            string
}

func newApproveWorld(t *testing.T, u testutil.User) *approveWorld {
	curl, err := exec.LookPath("curl")
	if err != nil || curl != "/usr/bin/curl" {
		t.Skipf("curl is not installed in /usr/bin (%v): the approval test fetches through the egress proxy with it", err)
	}
	srv := testutil.ServeTLS(t, "allowed.test", "denied.test")
	w := &approveWorld{f: newFixture(t, u.UID, ""), u: u, port: strconv.Itoa(srv.Port)}
	w.prof, w.ca = filepath.Join(w.f.base, "net.toml"), filepath.Join(w.f.base, "ca.pem")
	w.key, w.otherKey = filepath.Join(w.f.base, "keys", "cap.key"), filepath.Join(w.f.base, "keys", "other.key")
	// The CA is the run's to read: beneath the root.
	w.ca = filepath.Join(w.f.root, "ca.pem")
	for _, f := range []struct{ path, data string }{{w.ca, string(srv.CAPEM)}, {w.prof, fmt.Sprintf(`name = "net"
network = "allowlist"
[allowlist]
hosts = ["allowed.test:%s"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"allowed.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]
`, w.port)}} {
		if err := os.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{w.key, w.otherKey} {
		if r := w.cli(t, "cap", "keygen", "--cap-key", k); r.Code != 0 {
			t.Fatalf("keygen: %s", r.Stderr)
		}
	}
	return w
}

func (w *approveWorld) cli(t *testing.T, args ...string) testutil.Result {
	return testutil.CLI{Bin: testutil.SelfBinary(t), UID: w.u.UID, Dir: w.f.base, Args: args}.Run(t)
}

// approve runs the command line the server gave (its "confine" is this
// binary) as the human would, and returns the token it printed.
func (w *approveWorld) approve(t *testing.T, line string) string {
	t.Helper()
	args := strings.Fields(line)
	if len(args) < 3 || args[0] != "confine" || args[1] != "approve" {
		t.Fatalf("approval command %q", line)
	}
	r := w.cli(t, args[1:]...)
	if r.Code != 0 {
		t.Fatalf("%s: exit %d: %s", line, r.Code, r.Stderr)
	}
	return strings.TrimSpace(r.Stdout)
}

func (w *approveWorld) serverArgs() []string {
	return []string{"mcp", "--root", w.f.root, "--profile", w.prof, "--cap-key", w.key, "--event-log", w.f.log,
		"--env", "SSL_CERT_FILE=" + w.ca, "--env", "CURL_CA_BUNDLE=" + w.ca}
}

func (w *approveWorld) connect(t *testing.T, opts *mcp.ClientOptions) *mcp.ClientSession {
	cmd := testutil.CLI{Bin: testutil.SelfBinary(t), UID: w.u.UID, Dir: w.f.base, Args: w.serverArgs()}.Command()
	c := mcp.NewClient(&mcp.Implementation{Name: "confine-test", Version: "1"}, opts)
	cs, err := c.Connect(context.Background(), &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

type runResult struct {
	ExitCode int `json:"exit_code"`
	Stdout   struct {
		Head string `json:"head"`
	} `json:"stdout"`
	Approvals []struct {
		Request, Host, Approve string
		Port                   int
		Granted                bool
	} `json:"approval_requests"`
}

func (w *approveWorld) fetch(t *testing.T, cs *mcp.ClientSession, host string, approvals ...string) (runResult, *mcp.CallToolResult) {
	t.Helper()
	args := map[string]any{"argv": []string{"/usr/bin/curl", "-sS", "https://" + host + ":" + w.port + "/"}}
	if len(approvals) > 0 {
		args["approvals"] = approvals
	}
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_command", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var r runResult
	if res.StructuredContent != nil {
		b, _ := json.Marshal(res.StructuredContent)
		_ = json.Unmarshal(b, &r)
	}
	return r, res
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestApprovals: a refused connection comes back with its approval
// request and the `confine approve` command for a human; the grant that
// command prints (signed with the operator's key) lets the session's next
// run through. A grant signed with another key, the agent's forgery, is
// refused and the host stays unreachable (the control: the operator's
// grant reaches it). Where the client supports elicitation the server
// asks the user, and the grant the user gives serves the session's
// later runs.
func TestApprovals(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			w := newApproveWorld(t, u)
			cs := w.connect(t, nil)
			if r, res := w.fetch(t, cs, "allowed.test"); res.IsError || r.Stdout.Head != "hello from allowed.test\n" {
				t.Fatalf("allowed.test: %s", text(res))
			}
			r, res := w.fetch(t, cs, "denied.test")
			if !res.IsError || len(r.Approvals) != 1 || r.Approvals[0].Host != "denied.test" || !strings.Contains(text(res), r.Approvals[0].Approve) {
				t.Fatalf("denied.test: want one approval request in the result and its summary: %s", text(res))
			}
			// The agent's forgery: a grant for the same request under a
			// key that is not the operator's.
			forged := w.approve(t, strings.Replace(r.Approvals[0].Approve, w.key, w.otherKey, 1))
			if r2, res := w.fetch(t, cs, "denied.test", forged); !res.IsError || strings.Contains(r2.Stdout.Head, "hello from denied.test") {
				t.Errorf("ESCAPED: a grant signed with another key reached denied.test: %s", text(res))
			}
			token := w.approve(t, r.Approvals[0].Approve)
			if r2, res := w.fetch(t, cs, "denied.test", token); res.IsError || r2.Stdout.Head != "hello from denied.test\n" {
				t.Errorf("control: the operator's grant did not let the run through: %s", text(res))
			}
		})
		t.Run(u.Name+"/elicitation", func(t *testing.T) {
			w := newApproveWorld(t, u)
			asked := 0
			cs := w.connect(t, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked++
				_, rest, _ := strings.Cut(req.Params.Message, "run\n  ")
				line, _, _ := strings.Cut(rest, "\n")
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"token": w.approve(t, line)}}, nil
			}})
			r, res := w.fetch(t, cs, "denied.test")
			if asked != 1 || len(r.Approvals) != 1 || !r.Approvals[0].Granted {
				t.Fatalf("the user was asked %d times; result: %s", asked, text(res))
			}
			if r2, res := w.fetch(t, cs, "denied.test"); res.IsError || r2.Stdout.Head != "hello from denied.test\n" {
				t.Errorf("after the user's grant: %s", text(res))
			}
			// Three tools/call requests: the run, the call again with the
			// user's answer (this client speaks the protocol version where
			// the client asks the user), the next run; one record each.
			evs := readEvents(t, w.f.log)
			if len(evs) != 3 || len(evs[1].Argv) < 3 || evs[1].Argv[0] != "run_command" || evs[1].Argv[1] != "grant" || evs[1].Error != "" {
				t.Errorf("records: %+v", evs)
			}
		})
	}
}

// TestApprovalsElicitTS: the same elicitation with the TypeScript SDK,
// whose protocol version (2025-11-25) has the server ask the user itself
// (server-initiated elicitation/create) within the call.
func TestApprovalsElicitTS(t *testing.T) {
	nodeClient(t)
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			w := newApproveWorld(t, u)
			plan := serverCommand(t, u.UID, w.f.base, nil, w.serverArgs()...)
			plan["elicit"] = true
			fetch := step{Tool: "run_command", Args: map[string]any{"argv": []string{"/usr/bin/curl", "-sS", "https://denied.test:" + w.port + "/"}}}
			plan["steps"] = []step{fetch, fetch}
			s := startClient(t, u.UID, w.f.base, plan)
			s.next() // the tools
			o := s.next()
			var r runResult
			if err := json.Unmarshal(o.Result.Structured, &r); err != nil || len(r.Approvals) != 1 || !r.Approvals[0].Granted {
				t.Fatalf("the refused run: want its approval request granted by the user: %v %s", err, o.everything())
			}
			if o = s.next(); o.Result.IsError || !strings.Contains(o.text(), "hello from denied.test") {
				t.Errorf("the next run of the session after the user's grant: %s", o.everything())
			}
			s.wait()
			// Two calls, two records: the answer came within the first.
			if evs := readEvents(t, w.f.log); len(evs) != 2 {
				t.Errorf("%d records for 2 calls", len(evs))
			}
		})
	}
}
