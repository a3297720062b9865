//go:build linux

package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
)

// newTestServer is a server of the Tier 1 tools under hostProfile, on a
// fresh root holding a.txt, recording in its own event log.
func newTestServer(t *testing.T, hostProfile string) (*Server, string) {
	t.Helper()
	e, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.MintHostOp(hostProfile, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := hostop.NewHost(c, root)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	h.EventLog = filepath.Join(t.TempDir(), "events.jsonl")
	s, err := New(Config{Host: h, RunProfile: policy.Profile{Name: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	return s, root
}

// connectMem connects a Go SDK client to s over an in-memory transport
// (what stdio is, without the pipes).
func connectMem(t *testing.T, s *Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Run(ctx, st) }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); cancel(); <-done })
	return cs
}

// TestReadOnlyHostProfile: under host-readonly the write tools are not
// served (not listed, and a call is refused as an unknown tool and
// recorded) and nothing is written; the control, the host profile,
// lists them and the same call writes.
func TestReadOnlyHostProfile(t *testing.T) {
	for _, tc := range []struct {
		profile string
		writes  bool
	}{{"host-readonly", false}, {"host", true}} {
		t.Run(tc.profile, func(t *testing.T) {
			s, root := newTestServer(t, tc.profile)
			cs := connectMem(t, s)
			ctx := context.Background()
			lt, err := cs.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range lt.Tools {
				names = append(names, tl.Name)
			}
			for name, op := range tier1Ops {
				allowed := tc.writes || (op != policy.OpWriteFile && op != policy.OpApplyPatch)
				if slices.Contains(names, name) != allowed {
					t.Errorf("%s listed: %v, want %v (tools: %v)", name, !allowed, allowed, names)
				}
			}
			calls := []*mcp.CallToolParams{
				{Name: "write_file", Arguments: map[string]any{"path": "b.txt", "content": "new\n"}},
				{Name: "apply_patch", Arguments: map[string]any{"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-orig\n+patched\n"}},
			}
			for _, p := range calls {
				res, err := cs.CallTool(ctx, p)
				served := err == nil && !res.IsError
				if served != tc.writes {
					t.Errorf("%s: served %v, want %v (%v %+v)", p.Name, served, tc.writes, err, res)
				}
			}
			b, _ := os.ReadFile(filepath.Join(root, "a.txt"))
			_, err = os.Stat(filepath.Join(root, "b.txt"))
			if wrote := err == nil || string(b) != "orig\n"; wrote != tc.writes {
				t.Errorf("wrote: %v, want %v (a.txt %q, b.txt %v)", wrote, tc.writes, b, err)
			}
			// Each call is one record, the refused ones too.
			evs, err := eventlog.ReadLast(s.cfg.Host.EventLog, 100)
			if err != nil || len(evs) != len(calls) {
				t.Fatalf("%d records for %d calls (%v)", len(evs), len(calls), err)
			}
			for _, e := range evs {
				if (e.Error == "") != tc.writes {
					t.Errorf("record %v: error %q", e.Argv, e.Error)
				}
			}
		})
	}
}

// TestSessionGrantsFreed: the grants a session was given are dropped when
// it ends: a stdio session whose client closed, an HTTP session the
// client deleted, one that went idle. The control: a session still open
// keeps its grant while another's is dropped.
func TestSessionGrantsFreed(t *testing.T) {
	const token = "0123456789abcdef-test"
	grant := func(t *testing.T, s *Server, id string) {
		t.Helper()
		for ss := range s.srv.Sessions() {
			if ss.ID() == id {
				s.keepGrant(ss, id, "grant-"+id)
				if g := s.sessionGrants(id); len(g) != 1 {
					t.Fatalf("session %s grants: %v", id, g)
				}
				return
			}
		}
		t.Fatalf("no server session %q", id)
	}
	freed := func(s *Server, id string) bool {
		return testutil.Await(func() bool { return len(s.sessionGrants(id)) == 0 })
	}
	httpConnect := func(t *testing.T, s *Server) *mcp.ClientSession {
		t.Helper()
		h, err := s.HTTPHandler(token)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h) // loopback
		t.Cleanup(srv.Close)
		hc := &http.Client{Transport: authed{token}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(context.Background(),
			&mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}

	t.Run("stdio", func(t *testing.T) {
		s, _ := newTestServer(t, "host")
		cs := connectMem(t, s)
		var id string
		for ss := range s.srv.Sessions() {
			id = ss.ID()
		}
		grant(t, s, id)
		cs.Close()
		if !freed(s, id) {
			t.Errorf("the stdio session ended and its grants stayed: %v", s.sessionGrants(id))
		}
	})
	t.Run("http-delete", func(t *testing.T) {
		s, _ := newTestServer(t, "host")
		a, b := httpConnect(t, s), httpConnect(t, s)
		grant(t, s, a.ID())
		grant(t, s, b.ID())
		a.Close() // DELETE
		if !freed(s, a.ID()) {
			t.Errorf("the deleted HTTP session's grants stayed: %v", s.sessionGrants(a.ID()))
		}
		if g := s.sessionGrants(b.ID()); len(g) != 1 {
			t.Errorf("control: the open session lost its grant: %v", g)
		}
		if res, err := b.CallTool(context.Background(), &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}}); err != nil || res.IsError {
			t.Errorf("control: the open session is not served: %v %+v", err, res)
		}
	})
	t.Run("http-idle", func(t *testing.T) {
		s, _ := newTestServer(t, "host")
		s.idle = 100 * time.Millisecond
		a := httpConnect(t, s)
		grant(t, s, a.ID())
		// No request: the session ends on its own.
		if !freed(s, a.ID()) {
			t.Errorf("the idle HTTP session's grants stayed: %v", s.sessionGrants(a.ID()))
		}
	})
}

// authed sends the bearer token.
type authed struct{ token string }

func (a authed) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+a.token)
	return http.DefaultTransport.RoundTrip(r)
}
