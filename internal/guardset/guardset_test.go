package guardset

import (
	"errors"
	"slices"
	"strings"
	"testing"
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
	for _, e := range protectedSet {
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
		{[]string{"no-network"}, Refuse, Report},
		{[]string{GitWaiver}, Report, Report},
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

func TestReadGitfile(t *testing.T) {
	for _, c := range []struct {
		in, dir, want string
		ok            bool
	}{
		{"gitdir: ../.git/modules/sub\n", "/w/sub", "/w/.git/modules/sub", true},
		{"gitdir: /abs/gd/\n", "/w", "/abs/gd", true},
		{"gitdir: x/./y", "/w", "/w/x/y", true},
		{"[core]\n", "/w", "", false},
		{strings.Repeat(" ", maxGitfile) + "gitdir: x", "/w", "", false},
	} {
		got, err := ReadGitfile(strings.NewReader(c.in), c.dir)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ReadGitfile(%.20q, %q) = %q, %v; want %q ok=%v", c.in, c.dir, got, err, c.want, c.ok)
		}
	}
}

// TestNew walks a table of profile changes: each valid one with what it
// does to a path of each kind, each invalid one with the error it names.
func TestNew(t *testing.T) {
	mk := add("makefile", "**/Makefile", Refuse)
	for _, c := range []struct {
		name      string
		waived    bool
		c         Changes
		err       string            // "" = valid
		actions   map[string]Action // path -> action (Allow: not protected)
		gitReport bool
		refused   []string // rows Refused lists
	}{
		{name: "defaults", actions: map[string]Action{".git/config": Refuse, ".envrc": Report, "Makefile": Allow},
			refused: nil},
		{name: "envrc refused", c: Changes{Refuse: []string{"envrc"}},
			actions: map[string]Action{".envrc": Refuse, "a/.envrc": Refuse, ".vscode/tasks.json": Report, ".git/config": Refuse},
			refused: []string{"envrc"}},
		{name: "hooks reported", c: Changes{Report: []string{"git-hooks"}},
			actions:   map[string]Action{".git/hooks/pre-commit": Report, ".git/config": Refuse},
			gitReport: true},
		{name: "content row reported", c: Changes{Report: []string{"git-directory"}}, gitReport: true,
			actions: map[string]Action{".git/config": Refuse}},
		{name: "waived, config back to refused", waived: true, c: Changes{Refuse: []string{"git-config"}},
			err: `row "git-config" is refused by default`},
		{name: "waived", waived: true, gitReport: true,
			actions: map[string]Action{".git/config": Report, ".git/hooks/x": Report}},
		{name: "added refused", c: Changes{Add: []Entry{mk}},
			actions: map[string]Action{"Makefile": Refuse, "sub/dir/Makefile": Refuse, "Makefile.am": Allow, ".git/config": Refuse},
			refused: []string{"makefile"}},
		{name: "added reported", c: Changes{Add: []Entry{add("tool", "tools/*/run.sh", Report)}},
			actions: map[string]Action{"tools/x/run.sh": Report, "tools/run.sh": Allow, "a/tools/x/run.sh": Allow}},
		{name: "added under .git stays git's", c: Changes{Add: []Entry{add("myhook", "**/.git/hooks/x", Report)}},
			actions: map[string]Action{".git/hooks/x": Refuse}},
		{name: "unknown row", c: Changes{Refuse: []string{"nosuch"}}, err: `no row "nosuch"`},
		{name: "moved to its default", c: Changes{Report: []string{"envrc"}}, err: `"envrc" is reported by default`},
		{name: "moved both ways", c: Changes{Refuse: []string{"envrc"}, Report: []string{"envrc"}}, err: "moved twice"},
		{name: "added name taken", c: Changes{Add: []Entry{add("envrc", "x", Refuse)}}, err: "the name is taken"},
		{name: "added twice", c: Changes{Add: []Entry{mk, mk}}, err: "the name is taken"},
		{name: "bad name", c: Changes{Add: []Entry{add("Make file", "x", Refuse)}}, err: "a name is"},
		{name: "absolute pattern", c: Changes{Add: []Entry{add("a", "/etc/x", Refuse)}}, err: "relative"},
		{name: "dotdot pattern", c: Changes{Add: []Entry{add("a", "../x", Refuse)}}, err: `".."`},
		{name: "empty component", c: Changes{Add: []Entry{add("a", "x//y", Refuse)}}, err: "empty"},
		{name: "wildcard inside", c: Changes{Add: []Entry{add("a", "**/*.sh", Refuse)}}, err: "whole component"},
		{name: "wildcards only", c: Changes{Add: []Entry{add("a", "**/*", Refuse)}}, err: "names nothing"},
		{name: "no pattern", c: Changes{Add: []Entry{add("a", "", Refuse)}}, err: "1 to 1024"},
		{name: "no action", c: Changes{Add: []Entry{add("a", "x", Allow)}}, err: "refuse or report"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := New(c.waived, c.c)
			if c.err != "" {
				if !errors.Is(err, ErrChange) || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("New = %v, want an ErrChange naming %q", err, c.err)
				}
				if p.moved != nil || p.added != nil {
					t.Fatalf("a refused change left a policy: %+v", p)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range c.actions {
				got := Allow
				if e, ok := p.Classify("/w", path); ok {
					got = p.Action(e)
				}
				if got != want {
					t.Errorf("%s: %v, want %v", path, got, want)
				}
			}
			if p.GitReported() != c.gitReport {
				t.Errorf("GitReported = %v, want %v", p.GitReported(), c.gitReport)
			}
			if got := names(p.Refused()); !slices.Equal(got, c.refused) && len(got)+len(c.refused) > 0 {
				t.Errorf("Refused = %v, want %v", got, c.refused)
			}
		})
	}
}

func add(name, pattern string, a Action) Entry {
	return Entry{Name: name, Pattern: pattern, Default: a}
}

func TestMatchBelow(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"ci/run.sh", "ci", true},
		{"ci/run.sh", "CI", true},
		{"ci/run.sh", "ci/run.sh", false},
		{"ci/run.sh", "src", false},
		{"ci/run.sh", "src/ci", false},
		{"**/Makefile", "a/b", true},
		{"**/Makefile", "", true},
		{"src/*/Makefile", "src/x", true},
		{"src/*/Makefile", "src", true},
		{"src/*/Makefile", "lib/x", false},
		{".vscode/tasks.json", ".vscode", true},
		{".vscode/tasks.json", ".vscode/tasks.json", false},
	} {
		if got := MatchBelow(Entry{Pattern: c.pattern}, c.path); got != c.want {
			t.Errorf("MatchBelow(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}

func TestMatchAlias(t *testing.T) {
	for _, c := range []struct {
		pattern, path string
		want          bool
	}{
		{"ci/run.sh", "ci", true},
		{"ci/run.sh", "CI", true},
		{"ci/run.sh", "ci/run.sh", false}, // the name itself: Match
		{"ci/run.sh", "src", false},
		{"ci/run.sh", "src/ci", false},
		{"**/Makefile", "x", false},
		{"**/Makefile", "a/b", false},
		{"**/.vscode/tasks.json", ".vscode", true},
		{"**/.vscode/tasks.json", "a/.vscode", true},
		{"**/.vscode/tasks.json", "a/b", false},
		{"src/**/Makefile", "src", true},
		{"src/**/Makefile", "src/b", true},
		{"src/**/Makefile", "src/b/c", true},
		{"src/**/Makefile", "lib", false},
		{"src/*/Makefile", "src/x", true},
		{"src/*/Makefile", "src/x/y", false},
	} {
		if got := MatchAlias(Entry{Pattern: c.pattern}, c.path); got != c.want {
			t.Errorf("MatchAlias(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
	}
}
