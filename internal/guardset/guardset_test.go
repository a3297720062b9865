package guardset

import (
	"errors"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		path, row string // row "" = not protected
	}{
		{".git", "git-dir"},
		{"sub/dir/.git", "git-dir"},
		{".GIT", "git-dir"},
		{".git/config", "git-config"},
		{"/abs/repo/.git/config", "git-config"},
		{".git/hooks/pre-commit", "git-hooks"},
		{".git/hooks", "git-hooks"},
		{"vendor/x/.git/hooks/post-checkout", "git-hooks"},
		{".git/info/attributes", "git-info"},
		{".git/modules/sub/config", "git-modules"},
		{".git/modules/sub/hooks/pre-commit", "git-modules"},
		{".git/worktrees/w/gitdir", "git-worktrees"},
		{".git/packed-refs", "git-metadata"},
		{"./.git/HEAD", "git-metadata"},
		{".envrc", "envrc"},
		{"a/.envrc", "envrc"},
		{".vscode/tasks.json", "vscode-tasks"},
		{".vscode/settings.json", "vscode-settings"},
		{".vscode/launch.json", ""},
		{".idea/runConfigurations/x.xml", "idea-run-configurations"},
		{".idea/workspace.xml", "idea-workspace"},
		{"src/main.go", ""},
		{".gitignore", ""},
		{"x.git/config", ""},
		{".github/workflows/ci.yml", ""},
		{"config", ""},
	} {
		e, ok := Classify(c.path)
		if ok != (c.row != "") || e.Name != c.row {
			t.Errorf("Classify(%q) = %q, %v; want %q", c.path, e.Name, ok, c.row)
		}
	}
}

// TestSetRowsReachable: every row is the first match of some path (a row
// shadowed by an earlier, broader one would never apply), and every row
// has a reason and a default.
func TestSetRowsReachable(t *testing.T) {
	for _, e := range Set {
		p := ""
		for _, c := range components(e.Pattern) {
			switch c {
			case "**":
				p += "d/"
			case "*":
				p += "x/"
			default:
				p += c + "/"
			}
		}
		p += "leaf"
		if got, _ := Classify(p); got.Name != e.Name {
			// A pattern ending in a name matches the name itself.
			if got, _ = Classify(p[:len(p)-len("/leaf")]); got.Name != e.Name {
				t.Errorf("row %s (%s) is never the first match (%q gives %q)", e.Name, e.Pattern, p, got.Name)
			}
		}
		if e.Why == "" || e.Default == Allow {
			t.Errorf("row %s has no reason or no default action", e.Name)
		}
	}
}

func TestPolicy(t *testing.T) {
	git, _ := Classify(".git/config")
	env, _ := Classify(".envrc")
	for _, c := range []struct {
		waive     []string
		git, edit Action
	}{
		{nil, Refuse, Report},
		{[]string{spec.GNoNetwork}, Refuse, Report},
		{[]string{spec.GGitPersistence}, Report, Report},
	} {
		p := For(c.waive)
		if a := p.Action(git); a != c.git {
			t.Errorf("waive %v: git action %v, want %v", c.waive, a, c.git)
		}
		if a := p.Action(env); a != c.edit {
			t.Errorf("waive %v: editor action %v, want %v", c.waive, a, c.edit)
		}
	}
	if err := Refusal(".git/config", git); !errors.Is(err, ErrProtected) {
		t.Errorf("Refusal does not wrap ErrProtected: %v", err)
	}
}

func TestGitDir(t *testing.T) {
	for _, c := range []struct {
		names []string
		want  bool
	}{
		{[]string{"HEAD", "objects", "refs"}, true},
		{[]string{"HEAD", "commondir"}, true},
		{[]string{"HEAD", "objects"}, false},
		{[]string{"objects", "refs"}, false},
		{nil, false},
	} {
		has := func(n string) bool {
			for _, x := range c.names {
				if x == n {
					return true
				}
			}
			return false
		}
		if got := GitDir(has); got != c.want {
			t.Errorf("GitDir(%v) = %v, want %v", c.names, got, c.want)
		}
	}
}

func TestParseGitfile(t *testing.T) {
	for _, c := range []struct {
		in, want string
		ok       bool
	}{
		{"gitdir: ../.git/modules/sub\n", "../.git/modules/sub", true},
		{"gitdir:/abs/gd", "/abs/gd", true},
		{"  gitdir:  x  \nmore", "x", true},
		{"[core]\n", "", false},
		{"gitdir:\n", "", false},
	} {
		got, err := ParseGitfile([]byte(c.in))
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseGitfile(%q) = %q, %v; want %q ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}
