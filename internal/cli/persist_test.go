//go:build linux

package cli

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// TestPersistenceReported: a command that plants a hook, points
// core.hooksPath elsewhere and creates a nested repository has each change
// in its result (reported, not prevented: see the README), and an ordinary
// build's output is not reported.
func TestPersistenceReported(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			if r := cliIn(t, u, wd, "", nil, "run", "--", "git", "init", "-q"); r.Code != 0 {
				t.Fatalf("git init: %d %s", r.Code, r.Stderr)
			}
			build := cliIn(t, u, wd, "", nil, "run", "--json", "--", "sh", "-c", "mkdir -p bin src && echo x > bin/out && echo y > src/a.go")
			var res spec.CommandResult
			if err := json.Unmarshal([]byte(build.Stdout), &res); err != nil || build.Code != 0 {
				t.Fatalf("build run: %d %v %s", build.Code, err, build.Stderr)
			}
			if len(res.Persistence) != 0 {
				t.Fatalf("an ordinary build reported %v", res.Persistence)
			}
			plant := cliIn(t, u, wd, "", nil, "run", "--json", "--", "sh", "-c",
				"printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit && git config core.hooksPath /tmp && mkdir -p lib/.git && mkdir -p .vscode && echo {} > .vscode/tasks.json")
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
			r := cliIn(t, u, wd, "", nil, "run", "--", "sh", "-c", "echo >> .git/config")
			if !strings.Contains(r.Stderr, "modified .git/config (git configuration)") {
				t.Errorf("stderr does not report the change: %q", r.Stderr)
			}
		})
	}
}
