//go:build linux

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

func TestGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			git := func(args ...string) {
				t.Helper()
				cmd := exec.Command("git", args...)
				cmd.Dir = wd
				cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + wd, "GIT_CONFIG_NOSYSTEM=1"}
				if os.Geteuid() == 0 && u.UID != 0 {
					cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
				}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			canary := filepath.Join(wd, "CANARY")
			git("init", "-q", "-b", "main")
			git("config", "user.name", "T")
			git("config", "user.email", "t@example.invalid")
			if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("a\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git("add", "a.txt")
			git("commit", "-qm", "first")
			git("config", "core.fsmonitor", "touch "+canary)
			git("config", "core.hooksPath", wd)
			if err := os.WriteFile(filepath.Join(wd, "pre-commit"), []byte("#!/bin/sh\ntouch "+canary+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("b\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			rows := []struct {
				args []string
				code int
				out  string
			}{
				{[]string{"git", "status"}, 0, " M a.txt"},
				{[]string{"git", "diff", "--json"}, 0, `+b\n`},
				{[]string{"git", "add", "a.txt"}, 0, ""},
				{[]string{"git", "commit", "-m", "second", "--json"}, 0, `"exit_code": 0`},
				{[]string{"git", "log", "--json"}, 0, `"subject": "second"`},
				{[]string{"git", "show", "--", "--output=x"}, 125, ""},
				{[]string{"git", "commit", "-m", "nothing", "--json"}, 1, `"kind": "git"`},
				{[]string{"git", "add", "../x"}, 125, ""},
				{[]string{"git", "commit", "-m", "x", "--profile", "host-readonly"}, 125, ""},
			}
			for _, r := range rows {
				res := cliIn(t, u, wd, "", nil, r.args...)
				if res.Code != r.code || !strings.Contains(res.Stdout, r.out) {
					t.Fatalf("%v: exit %d (want %d), stdout %q (want %q), stderr %q", r.args, res.Code, r.code, res.Stdout, r.out, res.Stderr)
				}
				if strings.Contains(strings.Join(r.args, " "), "--json") {
					var v map[string]any
					if err := json.Unmarshal([]byte(res.Stdout), &v); err != nil {
						t.Fatalf("%v: not JSON: %v", r.args, err)
					}
				}
			}
			if _, err := os.Stat(canary); err == nil {
				t.Fatal("a program the repository configured ran")
			}
			// Control: plain git on the same repository runs it.
			if err := os.WriteFile(filepath.Join(wd, "a.txt"), []byte("c\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			git("status")
			if _, err := os.Stat(canary); err != nil {
				t.Fatal("control: plain git status did not run core.fsmonitor; the test proves nothing")
			}
		})
	}
}
