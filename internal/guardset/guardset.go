// Package guardset is the persistence guard's protected set, as data: the
// paths a confined command or a Tier 1 operation could plant something in
// that the host later runs or obeys on its own, and what the guard does
// with each by default. Tier 1 (hostop) enforces it on every write; Tier 2
// (the root package's gitGuard) keeps the same git set read-only.
//
// Two classes:
//
//   - git: the metadata git reads in any repository, at any depth: a .git
//     directory or gitfile itself (creating, replacing or removing one),
//     its config, hooks, info/, modules/ (absorbed submodules), worktrees/
//     and everything else under it. Refused by default; waiving
//     spec.GGitPersistence in the profile turns the refusal into a
//     report, as in Tier 2.
//   - editor: files editors and shells run on their own when a directory
//     is opened or entered: .envrc (direnv), .vscode/tasks.json and
//     settings.json, .idea run configurations. Reported by default.
//
// Besides the table (Classify, lexical), GitDir says by content whether a
// directory is a git directory wherever it lies (a bare repository, the
// target of a gitfile), and ParseGitfile reads a gitfile.
package guardset

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// ErrProtected: a write into the protected set that the policy refuses.
var ErrProtected = errors.New("persistence guard: protected path")

// Class groups entries: "git" or "editor".
type Class string

// The classes.
const (
	Git    Class = "git"
	Editor Class = "editor"
)

// Action is what the guard does with a write to an entry.
type Action int

// The actions, weakest first.
const (
	// Allow: not protected.
	Allow Action = iota
	// Report: the write happens and is reported.
	Report
	// Refuse: the write is refused.
	Refuse
)

func (a Action) String() string {
	switch a {
	case Report:
		return "report"
	case Refuse:
		return "refuse"
	}
	return "allow"
}

// Entry is one row of the protected set.
type Entry struct {
	// Name is the row's stable name, as reports and errors give it.
	Name  string
	Class Class
	// Pattern is slash-separated components matched against a path's
	// components, ASCII case folded (a case-insensitive file system
	// takes ".GIT" for ".git"): "**" matches any number of components,
	// "*" exactly one, anything else itself.
	Pattern string
	// Default is the action without a waiver.
	Default Action
	// Why says what the host does with the file.
	Why string
}

// Set is the protected set, most specific row first: Classify returns the
// first row that matches.
var Set = []Entry{
	{Name: "git-dir", Class: Git, Pattern: "**/.git", Default: Refuse, Why: "a .git directory or gitfile: creating, replacing or removing one changes which repository git obeys"},
	{Name: "git-hooks", Class: Git, Pattern: "**/.git/hooks/**", Default: Refuse, Why: "git runs hooks on commit, checkout, merge, push"},
	{Name: "git-config", Class: Git, Pattern: "**/.git/config", Default: Refuse, Why: "names programs git runs (core.fsmonitor, core.pager, hooksPath, filters, aliases)"},
	{Name: "git-info", Class: Git, Pattern: "**/.git/info/**", Default: Refuse, Why: "attributes naming filter and diff drivers, excludes"},
	{Name: "git-modules", Class: Git, Pattern: "**/.git/modules/**", Default: Refuse, Why: "absorbed submodules' git directories, with their own config and hooks"},
	{Name: "git-worktrees", Class: Git, Pattern: "**/.git/worktrees/**", Default: Refuse, Why: "linked worktrees' git directories (config.worktree, gitdir, commondir)"},
	{Name: "git-metadata", Class: Git, Pattern: "**/.git/**", Default: Refuse, Why: "the rest of the git directory (HEAD, refs, objects, index, commondir) git trusts"},
	{Name: "envrc", Class: Editor, Pattern: "**/.envrc", Default: Report, Why: "direnv runs it on entering the directory"},
	{Name: "vscode-tasks", Class: Editor, Pattern: "**/.vscode/tasks.json", Default: Report, Why: "VS Code runs tasks, some on folder open"},
	{Name: "vscode-settings", Class: Editor, Pattern: "**/.vscode/settings.json", Default: Report, Why: "VS Code settings name interpreters, linters and terminal profiles it runs"},
	{Name: "idea-run-configurations", Class: Editor, Pattern: "**/.idea/runConfigurations/**", Default: Report, Why: "JetBrains IDEs run configurations"},
	{Name: "idea-workspace", Class: Editor, Pattern: "**/.idea/workspace.xml", Default: Report, Why: "JetBrains IDEs keep run configurations in it too"},
}

// GitDirRow is the row a directory GitDir recognises (by content, where no
// component is named .git) is reported under.
var GitDirRow = Entry{Name: "git-directory", Class: Git, Default: Refuse,
	Why: "a directory git takes as a git directory (a bare repository, a gitfile's target)"}

// GitfileTargetRow is the row the directory a work tree's gitfile names is
// reported under.
var GitfileTargetRow = Entry{Name: "gitfile-target", Class: Git, Default: Refuse,
	Why: "the git directory a gitfile (a linked worktree, a submodule) names"}

// Classify returns the first row of Set whose pattern matches path (slash
// separated, relative or absolute; "." and empty components are ignored).
func Classify(path string) (Entry, bool) {
	comps := components(path)
	for _, e := range Set {
		if match(components(e.Pattern), comps) {
			return e, true
		}
	}
	return Entry{}, false
}

func components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func match(pat, comps []string) bool {
	if len(pat) == 0 {
		return len(comps) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(comps); i++ {
			if match(pat[1:], comps[i:]) {
				return true
			}
		}
		return false
	}
	if len(comps) == 0 || (pat[0] != "*" && !strings.EqualFold(pat[0], comps[0])) {
		return false
	}
	return match(pat[1:], comps[1:])
}

// Policy is the action for each class: the defaults, with the profile's
// waivers applied.
type Policy struct {
	gitWaived bool
}

// For is the policy of a profile that waives the guarantees in waive:
// waiving spec.GGitPersistence reports the git set instead of refusing
// it, as Tier 2 does.
func For(waive []string) Policy {
	return Policy{gitWaived: slices.Contains(waive, spec.GGitPersistence)}
}

// Action is what p does with a write to e.
func (p Policy) Action(e Entry) Action {
	if e.Class == Git && p.gitWaived && e.Default == Refuse {
		return Report
	}
	return e.Default
}

// Refusal is the error for a refused write to path under e; it wraps
// ErrProtected.
func Refusal(path string, e Entry) error {
	return fmt.Errorf("%s: %w (%s: %s); %s is refused by default, waive %s in the profile to allow it (the write is then reported)",
		path, ErrProtected, e.Name, e.Why, e.Class, spec.GGitPersistence)
}

// GitDirNames are the entries whose presence makes a directory a git
// directory to git (setup.c, is_git_directory): HEAD, and objects/ with
// refs/, or commondir (a linked worktree's git directory).
var GitDirNames = []string{"HEAD", "objects", "refs", "commondir"}

// GitDir says whether a directory is a git directory, given which of
// GitDirNames it holds. A writer asks it with the name it is about to
// create counted as present, so that no write completes one.
func GitDir(has func(name string) bool) bool {
	return has("HEAD") && ((has("objects") && has("refs")) || has("commondir"))
}

// ParseGitfile returns the path a gitfile ("gitdir: <path>") names, as
// written (relative to the gitfile's directory when not absolute).
func ParseGitfile(b []byte) (string, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	p, ok := strings.CutPrefix(strings.TrimSpace(string(line)), "gitdir:")
	if !ok {
		return "", errors.New("a file without a gitdir: line")
	}
	p = strings.TrimSpace(p)
	if p == "" {
		return "", errors.New("an empty gitdir: line")
	}
	return p, nil
}
