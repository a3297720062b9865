//go:build linux

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// TestPersistenceReported: in a git work tree the guard keeps .git
// read-only by default (the planting command fails and .git is as it
// was); with the guard waived, a command that plants a hook, points
// core.hooksPath elsewhere and creates a nested repository has each change
// in its result, and an ordinary build's output is not reported.
func TestPersistenceReported(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	const plantScript = "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git config core.hooksPath /tmp && mkdir -p lib/.git && echo {} > .vscode/tasks.json"
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			if r := cliIn(t, u, wd, "", nil, "run", "--", "git", "init", "-q"); r.Code != 0 {
				t.Fatalf("git init: %d %s", r.Code, r.Stderr)
			}
			// Top-level entries exist beforehand: under the core the guard
			// fixes them (docs/tier1.md, "Persistence guard").
			for _, d := range []string{"bin", "src", "lib", ".vscode"} {
				mkdirOwned(t, filepath.Join(wd, d), u.UID)
			}
			waiver := filepath.Join(wd, "waive-git.toml")
			writeOwned(t, u, waiver, "name = \"git-writes\"\nwaive = [\"no-git-persistence\"]\n")
			build := cliIn(t, u, wd, "", nil, "run", "--json", "--", "sh", "-c", "echo x > bin/out && echo y > src/a.go")
			var res spec.CommandResult
			if err := json.Unmarshal([]byte(build.Stdout), &res); err != nil || build.Code != 0 {
				t.Fatalf("build run: %d %v %s", build.Code, err, build.Stderr)
			}
			if len(res.Persistence) != 0 {
				t.Fatalf("an ordinary build reported %v", res.Persistence)
			}
			hook := filepath.Join(wd, ".git", "hooks", "pre-commit")
			guarded := cliIn(t, u, wd, "", nil, "run", "--json", "--", "sh", "-c", plantScript)
			if err := json.Unmarshal([]byte(guarded.Stdout), &res); err != nil || res.ExitCode == 0 {
				t.Fatalf("planting under the guard: exit %d %v, want a failure\n%s", res.ExitCode, err, guarded.Stderr)
			}
			if _, err := os.Lstat(hook); err == nil {
				t.Fatalf("the guard let the command plant %s", hook)
			}
			plant := cliIn(t, u, wd, "", nil, "run", "--json", "--profile", waiver, "--", "sh", "-c", plantScript)
			res = spec.CommandResult{}
			if err := json.Unmarshal([]byte(plant.Stdout), &res); err != nil || plant.Code != 0 {
				t.Fatalf("planting run: %d %v %s", plant.Code, err, plant.Stderr)
			}
			for _, want := range []spec.Persistence{
				{Path: ".git/hooks/pre-commit", Kind: "created", What: "git hooks"},
				{Path: ".git/config", Kind: "modified", What: "git configuration"},
				{Path: "lib/.git", Kind: "created", What: "nested git repository"},
				{Path: ".vscode/tasks.json", Kind: "created", What: "editor task file"},
			} {
				if !slices.Contains(res.Persistence, want) {
					t.Errorf("%v not reported: %v", want, res.Persistence)
				}
			}
			// Without --json a human is told on stderr.
			r := cliIn(t, u, wd, "", nil, "run", "--profile", waiver, "--", "sh", "-c", "echo >> .git/config")
			if !strings.Contains(r.Stderr, "modified .git/config (git configuration)") {
				t.Errorf("stderr does not report the change: %q", r.Stderr)
			}
		})
	}
}

func mkdirOwned(t *testing.T, d string, uid int) {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
}
