//go:build linux

package persist

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func write(t testing.TB, root, rel, body string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiff(t *testing.T) {
	w := t.TempDir()
	write(t, w, ".git/config", "[core]\n")
	write(t, w, ".git/hooks/pre-commit.sample", "x")
	write(t, w, ".bashrc", "x")
	write(t, w, ".gitmodules", "[submodule \"lib\"]\n\tpath = vendor/lib\n")
	write(t, w, "vendor/lib/.git", "gitdir: ../../.git/modules/lib\n")
	write(t, w, "src/main.go", "package main\n")
	before := Take(w)
	// What a command could plant, and an ordinary build's output.
	write(t, w, ".git/hooks/pre-commit", "#!/bin/sh\n")
	write(t, w, ".git/config", "[core]\n\thooksPath = /tmp/h\n")
	write(t, w, "sub/.git/config", "")
	write(t, w, "vendor/lib/.git", "gitdir: /elsewhere\n")
	write(t, w, ".vscode/tasks.json", "{}")
	write(t, w, ".git/info/attributes", "* filter=x\n")
	if err := os.Remove(filepath.Join(w, ".bashrc")); err != nil {
		t.Fatal(err)
	}
	write(t, w, "src/main.go", "package main // changed\n")
	write(t, w, "bin/out", "binary")
	got := Diff(before, Take(w))
	want := []spec.Persistence{
		{Path: ".bashrc", Kind: Removed, What: "shell rc file"},
		{Path: ".git/config", Kind: Modified, What: "git configuration"},
		{Path: ".git/hooks/pre-commit", Kind: Created, What: "git hooks"},
		{Path: ".git/info/attributes", Kind: Created, What: "git attributes"},
		{Path: ".vscode/tasks.json", Kind: Created, What: "editor task file"},
		{Path: "sub/.git", Kind: Created, What: "nested git repository"},
		{Path: "vendor/lib/.git", Kind: Modified, What: "nested git repository"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff:\n got %v\nwant %v", got, want)
	}
	if d := Diff(Take(w), Take(w)); len(d) != 0 {
		t.Fatalf("no change, yet %v", d)
	}
	// Replacing .git itself (a new directory) is a change.
	b := Take(w)
	if err := os.Rename(filepath.Join(w, ".git"), filepath.Join(w, "old.git")); err != nil {
		t.Fatal(err)
	}
	write(t, w, ".git/config", "")
	d := Diff(b, Take(w))
	if !slices.Contains(d, spec.Persistence{Path: ".git", Kind: Modified, What: "git directory"}) {
		t.Fatalf("replaced .git not reported: %v", d)
	}
}

// BenchmarkTake is the cost a run pays twice: a work tree with .git, its
// sample hooks and 10,000 files in 100 top-level directories.
func BenchmarkTake(b *testing.B) {
	w := b.TempDir()
	for _, h := range []string{"applypatch-msg", "commit-msg", "post-update", "pre-applypatch", "pre-commit", "pre-push", "pre-rebase", "prepare-commit-msg", "update"} {
		write(b, w, ".git/hooks/"+h+".sample", "x")
	}
	write(b, w, ".git/config", "[core]\n")
	for d := 0; d < 100; d++ {
		for f := 0; f < 100; f++ {
			write(b, w, fmt.Sprintf("d%d/f%d", d, f), "x")
		}
	}
	b.ResetTimer()
	for b.Loop() {
		Take(w)
	}
}

// TestDiffRepos: the git directories below the top level a run began with
// (Take's repos, found by the launcher at any depth), absorbed submodules'
// under .git/modules and JetBrains run configurations are reported too.
func TestDiffRepos(t *testing.T) {
	w := t.TempDir()
	write(t, w, ".git/config", "[core]\n")
	write(t, w, ".git/modules/sub/config", "[core]\n")
	write(t, w, "sub/.git", "gitdir: ../.git/modules/sub\n")
	write(t, w, "a/b/vendored/.git/config", "[core]\n")
	write(t, w, "a/b/vendored/.git/hooks/pre-push.sample", "x")
	write(t, w, ".idea/runConfigurations/.keep", "")
	repos := []string{filepath.Join(w, ".git"), filepath.Join(w, "sub/.git"), filepath.Join(w, "a/b/vendored/.git"), "/elsewhere/.git"}
	before := Take(w, repos...)
	write(t, w, ".git/modules/sub/config", "[core]\n\tfsmonitor = x\n")
	write(t, w, ".git/modules/sub/hooks/post-checkout", "#!/bin/sh\n")
	write(t, w, "sub/.git", "gitdir: /tmp/evil\n")
	write(t, w, "a/b/vendored/.git/config", "[core]\n\tpager = x\n")
	write(t, w, "a/b/vendored/.git/hooks/pre-push", "#!/bin/sh\n")
	write(t, w, ".idea/runConfigurations/run.xml", "<x/>")
	got := Diff(before, Take(w, repos...))
	want := []spec.Persistence{
		{Path: ".git/modules/sub/config", Kind: Modified, What: "git configuration"},
		{Path: ".git/modules/sub/hooks", Kind: Created, What: "git hooks"},
		{Path: ".git/modules/sub/hooks/post-checkout", Kind: Created, What: "git hooks"},
		{Path: ".idea/runConfigurations/run.xml", Kind: Created, What: "editor run configuration"},
		{Path: "a/b/vendored/.git/config", Kind: Modified, What: "git configuration"},
		{Path: "a/b/vendored/.git/hooks/pre-push", Kind: Created, What: "git hooks"},
		{Path: "sub/.git", Kind: Modified, What: "nested git repository"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Diff:\n got %v\nwant %v", got, want)
	}
}
