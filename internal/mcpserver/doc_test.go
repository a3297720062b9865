//go:build linux

package mcpserver_test

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// mcpClientConfig is an MCP client's configuration (Claude Code's
// .mcp.json).
type mcpClientConfig struct {
	MCPServers map[string]struct {
		Command string   `json:"command"`
		Args    []string `json:"args"`
	} `json:"mcpServers"`
}

// docSnippet parses the ```json block after "<!-- mcp-snippet -->" in a
// document of the repository.
func docSnippet(t *testing.T, doc string) mcpClientConfig {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- mcp-snippet -->\n```json\n")
	block, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatalf("%s: no ```json block after <!-- mcp-snippet -->", doc)
	}
	var cfg mcpClientConfig
	if err := json.Unmarshal([]byte(block), &cfg); err != nil {
		t.Fatalf("%s: the snippet is not JSON: %v\n%s", doc, err, block)
	}
	return cfg
}

// TestDocSnippet checks the README's MCP client configuration (and its
// copy in docs/mcp.md): it parses the snippet and starts the server with
// its very arguments (its command, "confine", is this test binary acting
// as the CLI), in the directory a client would start it in, and calls a
// Tier 1 tool and run_command.
func TestDocSnippet(t *testing.T) {
	nodeClient(t)
	cfg := docSnippet(t, "../../README.md")
	if other := docSnippet(t, "../../docs/mcp.md"); !reflect.DeepEqual(other, cfg) {
		t.Errorf("docs/mcp.md's snippet %+v differs from the README's %+v", other, cfg)
	}
	srv, ok := cfg.MCPServers["confine"]
	if !ok || srv.Command != "confine" || len(srv.Args) == 0 || srv.Args[0] != "mcp" {
		t.Fatalf("the snippet has no confine server running `confine mcp`: %+v", cfg)
	}
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			f := newFixture(t, u.UID, "")
			plan := serverCommand(t, u.UID, f.root, nil, srv.Args...)
			plan["steps"] = []step{
				{Tool: "read_file", Args: map[string]any{"path": "a.txt"}},
				{Tool: "run_command", Args: map[string]any{"argv": []string{"sh", "-c", "cat a.txt; pwd"}}},
			}
			s := startClient(t, u.UID, f.base, plan)
			if tools := s.next(); len(tools.Tools) != 9 {
				t.Fatalf("tools: %v", tools.Tools)
			}
			if o := s.next(); o.Result.IsError || o.text() != "orig\n" {
				t.Errorf("read_file a.txt under the snippet's server: %s", o.everything())
			}
			if o := s.next(); o.Result.IsError || !strings.Contains(o.text(), "orig\n"+f.root+"\n") {
				t.Errorf("run_command under the snippet's server: %s", o.everything())
			}
			s.wait()
		})
	}
}
