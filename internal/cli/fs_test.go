//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/testutil"
)

func cliIn(t *testing.T, u testutil.User, wd, stdin string, env []string, args ...string) testutil.Result {
	t.Helper()
	cmd := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: env, Args: args}.Command()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := testutil.Result{Stdout: out.String(), Stderr: errb.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFS(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			outside := testutil.Workdir(t, u.UID)
			secretPath := filepath.Join(outside, "secret")
			logDir := testutil.Workdir(t, u.UID)
			logPath := filepath.Join(logDir, "events.jsonl")
			for name, body := range map[string]string{"a.txt": "one\ntwo\n", secretPath: "SECRET\n"} {
				p := name
				if !filepath.IsAbs(p) {
					p = filepath.Join(wd, name)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				if os.Geteuid() == 0 {
					_ = os.Chown(p, u.UID, u.UID)
				}
			}
			if err := os.Symlink(secretPath, filepath.Join(wd, "evil")); err != nil {
				t.Fatal(err)
			}
			env := []string{"CONFINE_EVENT_LOG=" + logPath}
			rows := []struct {
				name, stdin string
				args        []string
				code        int
				out, kind   string
			}{
				{"read", "", []string{"fs", "read", "a.txt"}, 0, "one\ntwo\n", ""},
				{"read-json", "", []string{"fs", "read", "--json", "a.txt"}, 0, `"total_bytes": 8`, ""},
				{"read-symlink-out", "", []string{"fs", "read", "--json", "evil"}, 125, "", "symlink_escape"},
				{"read-absolute", "", []string{"fs", "read", "--json", secretPath}, 125, "", "absolute"},
				{"read-dotdot", "", []string{"fs", "read", "--json", "../x"}, 125, "", "dotdot"},
				{"write", "new\n", []string{"fs", "write", "--json", "d/n.txt"}, 0, `"created": true`, ""},
				{"write-through-symlink", "PWNED\n", []string{"fs", "write", "--json", "evil"}, 125, "", "symlink"},
				{"patch", "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+deux\n", []string{"fs", "patch", "--json"}, 0, `"action": "modified"`, ""},
				{"patch-bad-hunk", "--- a/a.txt\n+++ b/a.txt\n@@ -1 +1 @@\n-nope\n+x\n", []string{"fs", "patch", "--json"}, 125, "", "patch"},
				{"patch-dotdot", "--- /dev/null\n+++ b/../planted\n@@ -0,0 +1 @@\n+x\n", []string{"fs", "patch", "--json"}, 125, "", "dotdot"},
				{"search", "", []string{"fs", "search", "de+ux"}, 0, "a.txt:2:deux\n", ""},
				{"search-nothing", "", []string{"fs", "search", "zzz"}, 1, "", ""},
				{"search-bad-pattern", "", []string{"fs", "search", "--json", "("}, 125, "", "pattern"},
				{"ls", "", []string{"fs", "ls"}, 0, "evil -> " + secretPath, ""},
				{"write-git-config", "[core]\n\tfsmonitor = x\n", []string{"fs", "write", "--json", ".git/config"}, ExitGuard, "", "guard"},
				{"patch-git-hook", "--- /dev/null\n+++ b/.git/hooks/pre-commit\n@@ -0,0 +1 @@\n+x\n", []string{"fs", "patch", "--json"}, ExitGuard, "", "guard"},
				{"write-envrc-reported", "x\n", []string{"fs", "write", "--json", ".envrc"}, 0, `"guard": "envrc"`, ""},
				{"readonly-profile-write", "x", []string{"fs", "write", "--json", "--profile", "host-readonly", "a.txt"}, 125, "", "capability"},
				{"tier2-profile", "", []string{"fs", "read", "--json", "--profile", "default", "a.txt"}, 125, "", "capability"},
			}
			for _, r := range rows {
				t.Run(r.name, func(t *testing.T) {
					res := cliIn(t, u, wd, r.stdin, env, r.args...)
					if res.Code != r.code || !strings.Contains(res.Stdout, r.out) {
						t.Fatalf("exit %d (want %d), stdout %q (want %q), stderr %q", res.Code, r.code, res.Stdout, r.out, res.Stderr)
					}
					if r.kind != "" {
						var e refusalJSON
						if err := json.Unmarshal([]byte(res.Stdout), &e); err != nil || e.Error.Kind != r.kind || e.Error.ExitStatus != r.code || e.Error.Message == "" {
							t.Fatalf("error kind %q (want %q): %v %s", e.Error.Kind, r.kind, err, res.Stdout)
						}
					}
				})
			}
			if b, _ := os.ReadFile(secretPath); string(b) != "SECRET\n" {
				t.Fatalf("outside file changed: %q", b)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(wd), "planted")); err == nil {
				t.Fatal("patch planted a file outside the root")
			}
			evs, err := eventlog.ReadLast(logPath, 100)
			if err != nil {
				t.Fatal(err)
			}
			// Every operation is recorded, refused ones too, except the
			// tier 2 profile's: it gets no Tier 1 capability at all.
			if len(evs) != len(rows)-1 {
				t.Fatalf("%d events for %d operations", len(evs), len(rows)-1)
			}
			for _, e := range evs {
				if e.Backend != "host" || e.Dir != wd || len(e.Argv) == 0 {
					t.Errorf("event %+v", e)
				}
			}
		})
	}
}
