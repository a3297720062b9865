//go:build linux

package mcpserver_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// bearer adds the Authorization header to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func unixClient(sock, token string) *http.Client {
	return &http.Client{Transport: bearer{token, &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
	}}}
}

// TestHTTPUnixSocket serves `confine mcp --listen` on a unix socket and
// calls it with the Go SDK's streamable HTTP client: the socket is the
// user's alone (0600), a request without the token, or with another, is
// refused (the control: the same client with the token is served), and
// the calls are recorded with the HTTP session and the request ids.
func TestHTTPUnixSocket(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			f := newFixture(t, u.UID, "")
			sock, tokFile := filepath.Join(f.base, "mcp.sock"), filepath.Join(f.base, "token")
			cmd := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: f.base,
				Args: []string{"mcp", "--root", f.root, "--event-log", f.log, "--listen", sock, "--token-file", tokFile}}.Command()
			var trace strings.Builder
			cmd.Stderr = &trace
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			}()
			if !testutil.Await(func() bool { return exists(sock) }) {
				t.Fatalf("no socket: %s", trace.String())
			}
			st, err := os.Stat(sock)
			if err != nil || st.Mode().Perm() != 0o600 || st.Sys().(*syscall.Stat_t).Uid != uint32(u.UID) {
				t.Errorf("socket %v, mode %v: want the user's alone (0600)", err, st.Mode())
			}
			b, err := os.ReadFile(tokFile)
			if err != nil {
				t.Fatal(err)
			}
			token := strings.TrimSpace(string(b))

			ctx := context.Background()
			connect := func(tok string) (*mcp.ClientSession, error) {
				c := mcp.NewClient(&mcp.Implementation{Name: "confine-test", Version: "1"}, nil)
				return c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://confine.invalid/mcp", HTTPClient: unixClient(sock, tok), DisableStandaloneSSE: true}, nil)
			}
			for _, bad := range []string{"", "wrong-" + token} {
				if cs, err := connect(bad); err == nil {
					cs.Close()
					t.Errorf("a client with token %q was served", bad)
				}
			}
			cs, err := connect(token)
			if err != nil {
				t.Fatalf("the client with the token: %v\n%s", err, trace.String())
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}})
			if err != nil || res.IsError || res.Content[0].(*mcp.TextContent).Text != "orig\n" {
				t.Errorf("read_file over HTTP: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_command", Arguments: map[string]any{"argv": []string{"echo", "over-http"}}})
			if err != nil || res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "over-http") {
				t.Errorf("run_command over HTTP: %v %+v", err, res)
			}
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "../outside/secret"}})
			if err != nil || !res.IsError {
				t.Errorf("read_file ../outside/secret over HTTP was not refused: %v %+v", err, res)
			}
			sid := cs.ID()
			cs.Close()
			evs := readEvents(t, f.log)
			if len(evs) != 3 {
				t.Fatalf("%d records for 3 calls", len(evs))
			}
			jobs := map[string]bool{}
			for _, e := range evs {
				if sid == "" || e.TaskID != sid || e.JobID == "" || jobs[e.JobID] {
					t.Errorf("record %v: task %q (session %q) job %q", e.Argv, e.TaskID, sid, e.JobID)
				}
				jobs[e.JobID] = true
			}
		})
	}
}
