//go:build linux

package mcpserver_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// fixture is one session's world: root is what the server serves,
// outside a sibling holding what no tool may reach.
type fixture struct {
	uid          int
	base, root   string
	outside      string
	secret       string // content of outside/secret
	serverSecret string // a value in the server's own environment
	token        string // testutil.TokenEnv of the cancelled run
	log          string
	backend      string
}

func newFixture(t *testing.T, uid int, backend string) *fixture {
	base := testutil.Workdir(t, uid)
	f := &fixture{uid: uid, base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside"),
		secret: "SECRET-" + testutil.NewToken(), serverSecret: "SRVENV-" + testutil.NewToken(), token: testutil.NewToken(),
		log: filepath.Join(base, "events.jsonl"), backend: backend}
	// Made by the user itself, as its repository would be.
	out := asUser(t, uid, base, `set -e
mkdir root outside root/sub
printf '%s\n' "$SECRET" > outside/secret
printf 'victim\n' > outside/victim
printf 'victim\n' > outside/victim-c
printf '#!/bin/sh\necho TOOL-RAN\n' > outside/tool.sh
chmod 755 outside/tool.sh
cd root
printf 'orig\n' > a.txt
git init -q .
git add a.txt
git -c user.name=t -c user.email=t@example.invalid commit -qm init
ln -s ../outside/secret link
ln -s ../outside linkdir
echo ok`, "SECRET="+f.secret, "HOME="+base)
	if !strings.HasSuffix(strings.TrimSpace(out), "ok") {
		t.Fatalf("fixture: %s", out)
	}
	return f
}

// escapeRow is one attempt, through a tool argument, to widen the
// operator's profile or to reach outside the root. control makes the same
// attempt without confine, as the same uid, and reports whether it
// escaped (it must, or the row proves nothing); escaped judges the tool's
// outcome and the fixture afterwards.
type escapeRow struct {
	name    string
	tool    string
	args    func(f *fixture) map[string]any
	control func(t *testing.T, f *fixture) bool
	escaped func(f *fixture, o outcome) bool
}

// shows: the attempt escaped when the client saw the secret.
func shows(f *fixture, o outcome) bool { return strings.Contains(o.everything(), f.secret) }

func controlShows(script string) func(t *testing.T, f *fixture) bool {
	return func(t *testing.T, f *fixture) bool {
		return strings.Contains(asUser(t, f.uid, f.root, script, "SECRET="+f.secret), f.secret)
	}
}

func controlMakes(script, file string) func(t *testing.T, f *fixture) bool {
	return func(t *testing.T, f *fixture) bool {
		asUser(t, f.uid, f.root, script)
		return exists(filepath.Join(f.outside, file))
	}
}

func made(file string) func(f *fixture, o outcome) bool {
	return func(f *fixture, o outcome) bool { return exists(filepath.Join(f.outside, file)) }
}

// controlPlants runs script unconfined and reports whether file (beneath
// the root) exists afterwards.
func controlPlants(script, file string) func(t *testing.T, f *fixture) bool {
	return func(t *testing.T, f *fixture) bool {
		asUser(t, f.uid, f.root, script)
		return exists(filepath.Join(f.root, file))
	}
}

func planted(file string) func(f *fixture, o outcome) bool {
	return func(f *fixture, o outcome) bool { return exists(filepath.Join(f.root, file)) }
}

// appendDiff is a unified diff that appends lines to the file rel of the
// root, as it is now.
func appendDiff(f *fixture, rel string, lines ...string) string {
	b, err := os.ReadFile(filepath.Join(f.root, rel))
	if err != nil {
		return ""
	}
	old := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	var d strings.Builder
	fmt.Fprintf(&d, "--- a/%s\n+++ b/%s\n@@ -1,%d +1,%d @@\n", rel, rel, len(old), len(old)+len(lines))
	for _, l := range old {
		d.WriteString(" " + l + "\n")
	}
	for _, l := range lines {
		d.WriteString("+" + l + "\n")
	}
	return d.String()
}

func newFileDiff(target string) string {
	return "--- /dev/null\n+++ b/" + target + "\n@@ -0,0 +1 @@\n+planted\n"
}

var escapeRows = []escapeRow{
	{name: "read-dotdot", tool: "read_file",
		args:    func(f *fixture) map[string]any { return map[string]any{"path": "../outside/secret"} },
		control: controlShows("cat ../outside/secret"), escaped: shows},
	{name: "read-absolute", tool: "read_file",
		args:    func(f *fixture) map[string]any { return map[string]any{"path": filepath.Join(f.outside, "secret")} },
		control: controlShows("cat ../outside/secret"), escaped: shows},
	{name: "read-symlink", tool: "read_file",
		args:    func(f *fixture) map[string]any { return map[string]any{"path": "link"} },
		control: controlShows("cat link"), escaped: shows},
	{name: "list-symlink-dir", tool: "list",
		args: func(f *fixture) map[string]any { return map[string]any{"path": "linkdir"} },
		control: func(t *testing.T, f *fixture) bool {
			return strings.Contains(asUser(t, f.uid, f.root, "ls linkdir/"), "tool.sh")
		},
		escaped: func(f *fixture, o outcome) bool { return strings.Contains(o.everything(), "tool.sh") }},
	{name: "search-through-symlinks", tool: "search",
		args:    func(f *fixture) map[string]any { return map[string]any{"pattern": "SECRET-", "path": "."} },
		control: controlShows("grep -R SECRET- ."), escaped: shows},
	{name: "search-symlink-dir", tool: "search",
		args:    func(f *fixture) map[string]any { return map[string]any{"pattern": "SECRET-", "path": "linkdir"} },
		control: controlShows("grep -r SECRET- linkdir/"), escaped: shows},
	{name: "write-dotdot", tool: "write_file",
		args:    func(f *fixture) map[string]any { return map[string]any{"path": "../outside/w-dotdot", "content": "x"} },
		control: controlMakes("echo x > ../outside/w-dotdot-c", "w-dotdot-c"), escaped: made("w-dotdot")},
	{name: "write-absolute", tool: "write_file",
		args: func(f *fixture) map[string]any {
			return map[string]any{"path": filepath.Join(f.outside, "w-abs"), "content": "x"}
		},
		control: controlMakes("echo x > ../outside/w-abs-c", "w-abs-c"), escaped: made("w-abs")},
	{name: "write-symlink-dir", tool: "write_file",
		args:    func(f *fixture) map[string]any { return map[string]any{"path": "linkdir/w-link", "content": "x"} },
		control: controlMakes("echo x > linkdir/w-link-c", "w-link-c"), escaped: made("w-link")},
	{name: "patch-dotdot", tool: "apply_patch",
		args:    func(f *fixture) map[string]any { return map[string]any{"patch": newFileDiff("../outside/p-dotdot")} },
		control: controlMakes("echo planted > ../outside/p-dotdot-c", "p-dotdot-c"), escaped: made("p-dotdot")},
	{name: "patch-absolute", tool: "apply_patch",
		args: func(f *fixture) map[string]any {
			return map[string]any{"patch": "--- /dev/null\n+++ " + filepath.Join(f.outside, "p-abs") + "\n@@ -0,0 +1 @@\n+planted\n"}
		},
		control: controlMakes("echo planted > ../outside/p-abs-c", "p-abs-c"), escaped: made("p-abs")},
	{name: "patch-symlink-target", tool: "apply_patch",
		args: func(f *fixture) map[string]any {
			return map[string]any{"patch": "--- a/linkdir/victim\n+++ b/linkdir/victim\n@@ -1 +1 @@\n-victim\n+owned\n"}
		},
		control: func(t *testing.T, f *fixture) bool {
			asUser(t, f.uid, f.root, "echo owned > linkdir/victim-c")
			b, _ := os.ReadFile(filepath.Join(f.outside, "victim-c"))
			return strings.Contains(string(b), "owned")
		},
		escaped: func(f *fixture, o outcome) bool {
			b, _ := os.ReadFile(filepath.Join(f.outside, "victim"))
			return strings.Contains(string(b), "owned")
		}},
	{name: "run-cwd-dotdot", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"cat", "secret"}, "cwd": "../outside"}
		},
		control: controlShows("cd ../outside && cat secret"), escaped: shows},
	{name: "run-cwd-symlink", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"cat", "secret"}, "cwd": "linkdir"}
		},
		control: controlShows("cd linkdir && cat secret"), escaped: shows},
	{name: "run-read-outside", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"cat", filepath.Join(f.outside, "secret")}}
		},
		control: controlShows("cat ../outside/secret"), escaped: shows},
	{name: "run-write-outside", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"sh", "-c", "echo x > " + filepath.Join(f.outside, "r-write")}}
		},
		control: controlMakes("echo x > ../outside/r-write-c", "r-write-c"), escaped: made("r-write")},
	{name: "run-program-outside-view", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{filepath.Join(f.outside, "tool.sh")}}
		},
		control: func(t *testing.T, f *fixture) bool {
			return strings.Contains(asUser(t, f.uid, f.root, "../outside/tool.sh"), "TOOL-RAN")
		},
		escaped: func(f *fixture, o outcome) bool { return strings.Contains(o.everything(), "TOOL-RAN") }},
	// Fields no schema lists (a root, a profile, a waiver, a backend)
	// are refused, so the write they would allow does not happen.
	{name: "run-widen-fields", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"sh", "-c", "echo x > " + filepath.Join(f.outside, "r-widen")},
				"rw": []string{f.outside}, "profile": "host", "waive": []string{"no-network"}, "backend": "bwrap"}
		},
		control: controlMakes("echo x > ../outside/r-widen-c", "r-widen-c"), escaped: made("r-widen")},
	// The persistence guard of hostop's write paths: nothing a program
	// outside the sandbox runs later (git hooks and configuration, a
	// nested repository) is planted through write_file or apply_patch.
	// The controls plant a sibling of the same kind, unconfined.
	{name: "write-dotgit-hook", tool: "write_file",
		args: func(f *fixture) map[string]any {
			return map[string]any{"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\ntouch pwned\n"}
		},
		control: controlPlants("printf '#!/bin/sh\n' > .git/hooks/post-checkout", ".git/hooks/post-checkout"), escaped: planted(".git/hooks/pre-commit")},
	{name: "patch-dotgit-hook", tool: "apply_patch",
		args:    func(f *fixture) map[string]any { return map[string]any{"patch": newFileDiff(".git/hooks/pre-push")} },
		control: controlPlants("printf '#!/bin/sh\n' > .git/hooks/post-merge", ".git/hooks/post-merge"), escaped: planted(".git/hooks/pre-push")},
	{name: "patch-dotgit-config", tool: "apply_patch",
		args: func(f *fixture) map[string]any {
			return map[string]any{"patch": appendDiff(f, ".git/config", "[core]", "\thooksPath = /tmp")}
		},
		control: func(t *testing.T, f *fixture) bool {
			asUser(t, f.uid, f.root, "git config --file .git/config-c core.hooksPath /tmp")
			b, _ := os.ReadFile(filepath.Join(f.root, ".git/config-c"))
			return strings.Contains(string(b), "hooksPath")
		},
		escaped: func(f *fixture, o outcome) bool {
			b, _ := os.ReadFile(filepath.Join(f.root, ".git/config"))
			return strings.Contains(string(b), "hooksPath")
		}},
	{name: "write-nested-repository", tool: "write_file",
		args: func(f *fixture) map[string]any {
			return map[string]any{"path": "sub/.git/config", "content": "[core]\n\thooksPath = /tmp\n"}
		},
		control: controlPlants("mkdir -p sub-c/.git && echo x > sub-c/.git/config", "sub-c/.git/config"), escaped: planted("sub/.git")},
	// A variable the operator did not name is refused.
	{name: "run-env-unlisted", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"sh", "-c", "echo v=$BASH_ENV"}, "env": map[string]string{"BASH_ENV": f.secret}}
		},
		control: controlShows(`BASH_ENV="$SECRET" sh -c 'echo v=$BASH_ENV'`), escaped: shows},
	// A variable the operator named still passes the sanitiser: the
	// loader's are refused.
	{name: "run-env-loader", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"sh", "-c", "echo v=$LD_PRELOAD"}, "env": map[string]string{"LD_PRELOAD": f.secret}}
		},
		control: controlShows(`LD_PRELOAD="$SECRET" sh -c 'echo v=$LD_PRELOAD' 2>/dev/null`), escaped: shows},
	// The server's own environment never reaches a run.
	{name: "run-server-env", tool: "run_command",
		args: func(f *fixture) map[string]any {
			return map[string]any{"argv": []string{"sh", "-c", "echo v=$MCP_SERVER_SECRET"}}
		},
		control: func(t *testing.T, f *fixture) bool {
			return strings.Contains(asUser(t, f.uid, f.root, "echo v=$MCP_SERVER_SECRET", "MCP_SERVER_SECRET="+f.serverSecret), f.serverSecret)
		},
		escaped: func(f *fixture, o outcome) bool { return strings.Contains(o.everything(), f.serverSecret) }},
}

// functional is the work every tool must do, with its check.
type functional struct {
	step  step
	check func(t *testing.T, f *fixture, o outcome)
}

func wantText(sub string) func(t *testing.T, f *fixture, o outcome) {
	return func(t *testing.T, f *fixture, o outcome) {
		t.Helper()
		if o.Result.IsError || !strings.Contains(o.text(), sub) {
			t.Errorf("want success with %q, got error=%v %q %s", sub, o.Result.IsError, o.text(), o.Error)
		}
	}
}

func functionals(f *fixture) []functional {
	return []functional{
		{step{Tool: "write_file", Args: map[string]any{"path": "sub/new.txt", "content": "made by write_file\n"}}, func(t *testing.T, f *fixture, o outcome) {
			wantText("wrote 19 bytes")(t, f, o)
			if b, _ := os.ReadFile(filepath.Join(f.root, "sub/new.txt")); string(b) != "made by write_file\n" {
				t.Errorf("sub/new.txt holds %q", b)
			}
		}},
		{step{Tool: "read_file", Args: map[string]any{"path": "a.txt"}}, wantText("orig")},
		{step{Tool: "list", Args: map[string]any{"path": "."}}, wantText("a.txt")},
		{step{Tool: "search", Args: map[string]any{"pattern": "^made by", "path": "sub"}}, wantText("new.txt:1:made by write_file")},
		{step{Tool: "apply_patch", Args: map[string]any{"patch": "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-orig\n+patched\n"}}, func(t *testing.T, f *fixture, o outcome) {
			wantText("a.txt")(t, f, o)
			if b, _ := os.ReadFile(filepath.Join(f.root, "a.txt")); string(b) != "patched\n" {
				t.Errorf("a.txt holds %q after the patch", b)
			}
		}},
		{step{Tool: "git_status", Args: map[string]any{}}, wantText(" M a.txt")},
		{step{Tool: "git_diff", Args: map[string]any{}}, wantText("+patched")},
		{step{Tool: "git_log", Args: map[string]any{"max_count": 5}}, wantText("init")},
		{step{Tool: "run_command", Args: map[string]any{"argv": []string{"sh", "-c", "cat ../a.txt; pwd; echo v=$AGENT_VAR; echo to-stderr >&2; cat; exit 3"},
			"cwd": "sub", "env": map[string]string{"AGENT_VAR": "agent-value"}, "stdin": "from-stdin\n", "timeout_seconds": 30}},
			func(t *testing.T, f *fixture, o outcome) {
				var r struct {
					ExitCode int    `json:"exit_code"`
					Backend  string `json:"backend"`
					Stdout   struct {
						Head string `json:"head"`
					} `json:"stdout"`
					Stderr struct {
						Head string `json:"head"`
					} `json:"stderr"`
					Denials []any  `json:"denials"`
					TaskID  string `json:"task_id"`
				}
				if err := json.Unmarshal(o.Result.Structured, &r); err != nil {
					t.Fatalf("run_command result %s: %v (%s)", o.Result.Structured, err, o.everything())
				}
				want := "patched\n" + filepath.Join(f.root, "sub") + "\nv=agent-value\nfrom-stdin\n"
				if r.ExitCode != 3 || r.Stdout.Head != want || r.Stderr.Head != "to-stderr\n" || !o.Result.IsError {
					t.Errorf("run_command: exit %d stdout %q stderr %q isError %v; want exit 3, stdout %q (%s)", r.ExitCode, r.Stdout.Head, r.Stderr.Head, o.Result.IsError, want, o.text())
				}
				if wantB := map[string]string{"namespaces": "landlock+namespaces", "core": "landlock+seccomp"}[f.backend]; r.Backend != wantB {
					t.Errorf("backend %q, want %q", r.Backend, wantB)
				}
				if r.Denials == nil || r.TaskID == "" {
					t.Errorf("the result lacks denials or task_id: %s", o.Result.Structured)
				}
				// (Live output is checked on the cancelled run, which waits
				// after its output: the TypeScript SDK handles a
				// notification in a later microtask than the response, so
				// the last ones of a run that ends at once may be dropped.)
			}},
		{step{Tool: "run_command", Args: map[string]any{"argv": []string{"true"}, "timeout_seconds": 3600}}, func(t *testing.T, f *fixture, o outcome) {
			if !o.Result.IsError || !strings.Contains(o.text(), "above the operator's") {
				t.Errorf("a timeout above the operator's was not refused: %s", o.everything())
			}
		}},
	}
}

// toolArgs is every tool's arguments, sorted (docs/mcp.md's table).
var toolArgs = map[string][]string{
	"read_file":   {"limit", "path"},
	"list":        {"limit", "path"},
	"search":      {"max_matches", "path", "pattern"},
	"apply_patch": {"patch"},
	"write_file":  {"content", "path"},
	"git_status":  nil,
	"git_diff":    {"cached", "paths"},
	"git_log":     {"max_count", "rev"},
	"run_command": {"approvals", "argv", "cwd", "env", "stdin", "timeout_seconds"},
}

// TestMCP drives `confine mcp` with the official TypeScript SDK: every
// tool, the escape rows (each with its control), a cancelled run whose
// whole tree must be gone, and the audit records, under the namespaces
// and core backends, as root and as uid 65534.
func TestMCP(t *testing.T) {
	nodeClient(t)
	for _, u := range testutil.Users(t) {
		for _, backend := range []string{"namespaces", "core"} {
			t.Run(u.Name+"/"+backend, func(t *testing.T) {
				if backend == "namespaces" && testutil.SimulatingContainer() {
					t.Skipf("no namespaces in the simulated container (%s)", testutil.Mode())
				}
				testMCP(t, u, backend)
			})
		}
	}
}

func testMCP(t *testing.T, u testutil.User, backend string) {
	f := newFixture(t, u.UID, backend)
	fns := functionals(f)
	var steps []step
	for _, fn := range fns {
		steps = append(steps, fn.step)
	}
	for _, r := range escapeRows {
		steps = append(steps, step{Name: r.name, Tool: r.tool, Args: r.args(f)})
	}
	cancelStep := len(steps)
	steps = append(steps, step{Name: "cancel", Tool: "run_command", CancelOn: "CANCEL-READY",
		Args: map[string]any{"env": map[string]string{testutil.TokenEnv: f.token},
			"argv": []string{"sh", "-c", "sleep 1000 & setsid sh -c 'sleep 1000 & sleep 1000' & sleep 0.2; echo CANCEL-READY; wait"}}})
	// The run after the cancelled one: the session goes on.
	steps = append(steps, step{Name: "after-cancel", Tool: "run_command", Args: map[string]any{"argv": []string{"echo", "still-serving"}}})

	plan := serverCommand(t, u.UID, f.base, []string{"MCP_SERVER_SECRET=" + f.serverSecret},
		"mcp", "--root", f.root, "--backend", backend, "--event-log", f.log, "--timeout", "120s",
		"--agent-env", "AGENT_VAR", "--agent-env", "LD_PRELOAD", "--agent-env", testutil.TokenEnv)
	plan["steps"] = steps
	s := startClient(t, u.UID, f.base, plan)

	tools := s.next()
	want := []string{"apply_patch", "git_diff", "git_log", "git_status", "list", "read_file", "run_command", "search", "write_file"}
	if !slices.Equal(tools.Tools, want) {
		t.Fatalf("tools %v, want %v", tools.Tools, want)
	}
	// What a call may pass, as the client sees it: exactly these fields,
	// none other accepted. None names a root, a profile, a waiver, an
	// allowlist entry or a backend.
	for tool, props := range toolArgs {
		sc := tools.Schemas[tool]
		var got []string
		for p := range sc.Properties {
			got = append(got, p)
		}
		slices.Sort(got)
		if !slices.Equal(got, props) || sc.AdditionalProperties == nil || *sc.AdditionalProperties {
			t.Errorf("%s's input schema takes %v (additionalProperties %v), want exactly %v", tool, got, sc.AdditionalProperties, props)
		}
	}
	for i, fn := range fns {
		o := s.next()
		if o.Step != i {
			t.Fatalf("step %d: got line for %d", i, o.Step)
		}
		if fn.step.Tool == "run_command" && backend == "namespaces" && o.Result.IsError && strings.Contains(o.text(), "unavailable") {
			t.Skipf("the namespaces backend is unavailable here: %s", o.text())
		}
		t.Run(fn.step.Tool, func(t *testing.T) { fn.check(t, f, o) })
	}
	for i, r := range escapeRows {
		o := s.next()
		if o.Step != len(fns)+i {
			t.Fatalf("escape row %s: got line for step %d", r.name, o.Step)
		}
		t.Run("escape/"+r.name, func(t *testing.T) {
			t.Logf("%s: %s", r.tool, strings.TrimSpace(o.text()))
			if r.escaped(f, o) {
				t.Errorf("ESCAPED through %s %s: %s", r.tool, fmtArgs(steps[len(fns)+i].Args), o.everything())
			}
			if !r.control(t, f) {
				t.Errorf("control: the same attempt without confine did not escape, so the row proves nothing")
			}
		})
	}

	// Cancellation: the run's processes exist, the client cancels, and
	// none is left (by pid), while the server still runs.
	o := s.next()
	// The client saw CANCEL-READY in a progress notification: the live
	// output arrives while the run goes on.
	if o.Step != cancelStep || o.Event != "running" {
		t.Fatalf("want the cancelled run running, its output seen live, got %+v", o)
	}
	pids := testutil.TokenPids(f.token)
	if len(pids) < 3 {
		t.Errorf("the run to cancel has %d processes (%v), want its shell and three sleeps", len(pids), pids)
	}
	s.send()
	if o = s.next(); o.Event != "cancelled" {
		t.Fatalf("want the call cancelled, got %+v", o)
	}
	if left := waitGone(f.token, pids); len(left) > 0 {
		t.Errorf("processes of the cancelled run survive: %v (of %v)", left, pids)
	}
	s.send()
	if o = s.next(); o.Result.IsError || !strings.Contains(o.text(), "still-serving") {
		t.Errorf("the run after the cancelled one: %s", o.everything())
	}
	s.wait()

	// Audit: one record per tool call, the session as task id, the
	// request id as job id.
	evs := readEvents(t, f.log)
	if len(evs) != len(steps) {
		t.Errorf("%d event-log records for %d tool calls", len(evs), len(steps))
	}
	jobs := map[string]bool{}
	for _, e := range evs {
		if !strings.HasPrefix(e.TaskID, "mcp-") || e.TaskID != evs[0].TaskID || e.JobID == "" || jobs[e.JobID] {
			t.Errorf("record %s %v: task %q job %q (want one session id, distinct job ids)", e.RunID, e.Argv, e.TaskID, e.JobID)
		}
		jobs[e.JobID] = true
	}
}
