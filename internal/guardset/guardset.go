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
// A profile's [guard] table (policy.Guard; docs/guard.md) moves rows
// between refused and reported and adds rows of its own (class
// "profile"): New validates those changes and makes the Policy every
// entry point applies.
//
// Besides the table (Classify, lexical), GitDir says by content whether a
// directory is a git directory wherever it lies (a bare repository, the
// target of a gitfile), and ParseGitfile reads a gitfile.
package guardset

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
)

// ErrProtected: a write into the protected set that the policy refuses.
var ErrProtected = errors.New("persistence guard: protected path")

// Class groups entries: "git" or "editor".
type Class string

// The classes.
const (
	Git    Class = "git"
	Editor Class = "editor"
	// Profile: a row a profile added.
	Profile Class = "profile"
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

// protectedSet is the protected set, most specific row first: Classify returns the
// first row that matches.
var protectedSet = []Entry{
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
func GitDirRow() Entry { return gitDirRow }

var gitDirRow = Entry{Name: "git-directory", Class: Git, Default: Refuse,
	Why: "a directory git takes as a git directory (a bare repository, a gitfile's target)"}

// GitfileTargetRow is the row the directory a work tree's gitfile names is
// reported under.
func GitfileTargetRow() Entry { return gitfileTargetRow }

var gitfileTargetRow = Entry{Name: "gitfile-target", Class: Git, Default: Refuse,
	Why: "the git directory a gitfile (a linked worktree, a submodule) names"}

// Classify returns the first row of protectedSet whose pattern matches path (slash
// separated, relative or absolute; "." and empty components are ignored).
func Classify(path string) (Entry, bool) {
	return classify(protectedSet, path)
}

func classify(rows []Entry, path string) (Entry, bool) {
	comps := components(path)
	for _, e := range rows {
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

// Policy is what the guard does with each row: the defaults, the
// profile's moves and waiver, and the profile's own rows. The zero value
// is the defaults.
type Policy struct {
	gitWaived bool
	moved     map[string]Action
	added     []Entry
}

// GitWaiver is the guarantee whose waiver reports the whole git set
// (spec.GGitPersistence; policy's tests check they agree).
const GitWaiver = "no-git-persistence"

// Changes are a profile's changes to the set (its [guard] table): rows
// moved to refused and to reported, by name, and rows added.
type Changes struct {
	Refuse, Report []string
	Add            []Entry
}

// Rows are the rows a profile can move: protectedSet's and the two rows of git
// directories recognised by content.
func Rows() []Entry { return append(slices.Clone(protectedSet), gitDirRow, gitfileTargetRow) }

func row(name string) (Entry, bool) {
	for _, e := range Rows() {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// ErrChange: a profile's change to the set that New refuses.
var ErrChange = errors.New("persistence guard: invalid change to the protected set")

// ChangeError is New's refusal of one change; it wraps ErrChange.
type ChangeError struct {
	// Row is the row moved or added; Added says which.
	Row   string
	Added bool
	Msg   string
}

func (e *ChangeError) Error() string { return fmt.Sprintf("%v: %s", ErrChange, e.Msg) }

// Unwrap returns ErrChange.
func (e *ChangeError) Unwrap() error { return ErrChange }

func moveErr(row, format string, args ...any) error {
	return &ChangeError{Row: row, Msg: fmt.Sprintf(format, args...)}
}

func addErr(row, format string, args ...any) error {
	return &ChangeError{Row: row, Added: true, Msg: fmt.Sprintf("added row %q: ", row) + fmt.Sprintf(format, args...)}
}

// New is the policy of a profile that waives no-git-persistence (or not)
// and makes changes c. It refuses, wrapping ErrChange, the first invalid
// change (nothing of c applies then): a move of an unknown row, a row
// moved to what it does by default or moved twice, and an added row with
// a name that is not [a-z0-9][a-z0-9._-]* (at most 64 bytes) or is taken,
// a bad pattern (CheckPattern), or an action other than refuse or report.
func New(gitWaived bool, c Changes) (Policy, error) {
	p := Policy{gitWaived: gitWaived}
	for _, m := range []struct {
		names []string
		to    Action
	}{{c.Refuse, Refuse}, {c.Report, Report}} {
		for _, n := range m.names {
			e, ok := row(n)
			switch {
			case !ok:
				return Policy{}, moveErr(n, "no row %q to move (rows: %s)", n, strings.Join(names(Rows()), ", "))
			case p.moved[n] != Allow:
				return Policy{}, moveErr(n, "row %q moved twice", n)
			case e.Default == m.to:
				return Policy{}, moveErr(n, "row %q is %s by default", n, map[Action]string{Refuse: "refused", Report: "reported"}[m.to])
			}
			if p.moved == nil {
				p.moved = map[string]Action{}
			}
			p.moved[n] = m.to
		}
	}
	for _, e := range c.Add {
		if err := checkName(e.Name); err != nil {
			return Policy{}, addErr(e.Name, "%v", err)
		}
		if _, ok := row(e.Name); ok || slices.ContainsFunc(p.added, func(a Entry) bool { return a.Name == e.Name }) {
			return Policy{}, addErr(e.Name, "the name is taken")
		}
		if err := CheckPattern(e.Pattern); err != nil {
			return Policy{}, addErr(e.Name, "%v", err)
		}
		if e.Default != Refuse && e.Default != Report {
			return Policy{}, addErr(e.Name, "the action must be refuse or report")
		}
		e.Class = Profile
		if e.Why == "" {
			e.Why = "the profile protects it"
		}
		p.added = append(p.added, e)
	}
	return p, nil
}

func names(rows []Entry) []string {
	out := make([]string, len(rows))
	for i, e := range rows {
		out[i] = e.Name
	}
	return out
}

func checkName(n string) error {
	if n == "" || len(n) > 64 {
		return errors.New("a name needs 1 to 64 bytes")
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || i > 0 && (c == '-' || c == '.' || c == '_')
		if !ok {
			return errors.New("a name is [a-z0-9][a-z0-9._-]*")
		}
	}
	return nil
}

// maxPattern bounds an added row's pattern.
const maxPattern = 1024

// CheckPattern refuses a pattern an added row cannot have: empty or
// longer than 1 KiB, absolute, with an empty, ".", ".." or NUL-holding
// component, with '*' inside a component (only "*" and "**" are
// wildcards, as whole components), or without a component naming
// something (a pattern of wildcards alone would protect everything).
func CheckPattern(pat string) error {
	switch {
	case pat == "" || len(pat) > maxPattern:
		return errors.New("a pattern needs 1 to 1024 bytes")
	case strings.HasPrefix(pat, "/"):
		return errors.New("a pattern is relative to each writable root (write **/NAME for any depth)")
	}
	named := false
	for _, c := range strings.Split(pat, "/") {
		switch {
		case c == "" || c == "." || c == "..":
			return fmt.Errorf("pattern %q has an empty, \".\" or \"..\" component", pat)
		case strings.ContainsRune(c, 0):
			return fmt.Errorf("pattern %q holds NUL", pat)
		case c == "*" || c == "**":
		case strings.Contains(c, "*"):
			return fmt.Errorf("pattern %q: '*' is a wildcard only as a whole component (\"*\" one, \"**\" any number)", pat)
		default:
			named = true
		}
	}
	if !named {
		return fmt.Errorf("pattern %q names nothing: it would protect every path", pat)
	}
	return nil
}

// For is the policy of a profile without changes to the set that waives
// the guarantees in waive: waiving no-git-persistence reports the git set
// instead of refusing it, as Tier 2 does.
func For(waive []string) Policy {
	return Policy{gitWaived: slices.Contains(waive, GitWaiver)}
}

// Classify returns the row the path rel beneath root falls under: protectedSet's
// first match for the whole path (a root inside a .git counts), else the
// first of the profile's added rows for rel (their patterns are relative
// to the root: a writable root in Tier 2, the operation's root in Tier 1).
func (p Policy) Classify(root, rel string) (Entry, bool) {
	if e, ok := Classify(filepath.Join(root, rel)); ok {
		return e, ok
	}
	return classify(p.added, rel)
}

// Action is what p does with a write to e.
func (p Policy) Action(e Entry) Action {
	if a, ok := p.moved[e.Name]; ok {
		return a
	}
	if e.Class == Git && p.gitWaived && e.Default == Refuse {
		return Report
	}
	return e.Default
}

// GitReported says some git row is reported, not refused: the profile
// moved one, or waives no-git-persistence. The guarantee does not hold
// then, and a run's result says it is waived.
func (p Policy) GitReported() bool {
	for _, e := range Rows() {
		if e.Class == Git && p.Action(e) != Refuse {
			return true
		}
	}
	return false
}

// Refused are the rows besides git's that p refuses (an editor row moved
// there, the profile's own refused rows): Tier 2 keeps what matches them
// read-only.
func (p Policy) Refused() []Entry {
	var out []Entry
	for _, e := range append(Rows(), p.added...) {
		if e.Class != Git && p.Action(e) == Refuse {
			out = append(out, e)
		}
	}
	return out
}

// Reported are the rows besides git's that p reports: the persistence
// report watches what matches them.
func (p Policy) Reported() []Entry {
	var out []Entry
	for _, e := range append(Rows(), p.added...) {
		if e.Class != Git && p.Action(e) == Report {
			out = append(out, e)
		}
	}
	return out
}

// Match says path matches e's pattern (Classify's matching, for one row).
func Match(e Entry, path string) bool {
	return e.Pattern != "" && match(components(e.Pattern), components(path))
}

// MatchBelow says some path below path (path and at least one more
// component) could match e's pattern: a directory moved to path may carry
// a match.
func MatchBelow(e Entry, path string) bool {
	return e.Pattern != "" && matchBelow(components(e.Pattern), components(path))
}

func matchBelow(pat, comps []string) bool {
	switch {
	case len(comps) == 0:
		return len(pat) > 0
	case len(pat) == 0:
		return false
	case pat[0] == "**":
		// It can take every component left and more.
		return true
	case pat[0] != "*" && !strings.EqualFold(pat[0], comps[0]):
		return false
	}
	return matchBelow(pat[1:], comps[1:])
}

// MatchAlias says a symlink at path could make a path matching e resolve
// to a directory the pattern does not cover: path's last component is
// matched by a component of the pattern with more after it (ci for
// "ci/run.sh", .vscode for "**/.vscode/tasks.json"), or taken by a "**"
// that is not the pattern's first component (src/b for "src/**/Makefile").
// A leading "**" covers every directory of every root, so a symlink it
// takes leads to what the row already covers (or outside the writable
// roots, where nothing is written).
func MatchAlias(e Entry, path string) bool {
	return e.Pattern != "" && matchAlias(components(e.Pattern), components(path), true)
}

func matchAlias(pat, comps []string, leading bool) bool {
	if len(comps) == 0 || len(pat) == 0 {
		return false
	}
	if pat[0] == "**" {
		for i := 0; i < len(comps); i++ {
			if matchAlias(pat[1:], comps[i:], false) {
				return true
			}
		}
		return !leading && len(pat) > 1
	}
	if pat[0] != "*" && !strings.EqualFold(pat[0], comps[0]) {
		return false
	}
	if len(comps) == 1 {
		return len(pat) > 1
	}
	return matchAlias(pat[1:], comps[1:], false)
}

// Refusal is the error for a refused write to path under e; it wraps
// ErrProtected.
func Refusal(path string, e Entry) error {
	how := "list it in guard.report in the profile to allow it (the write is then reported)"
	switch e.Class {
	case Profile:
		how = "the profile's [guard.add." + e.Name + "] refuses it; action = \"report\" there allows it (the write is then reported)"
	case Git:
		how = fmt.Sprintf("waive %s, or list it in guard.report, in the profile to allow it (the write is then reported)", GitWaiver)
	}
	return fmt.Errorf("%s: %w (%s: %s); %s is refused, %s",
		path, ErrProtected, e.Name, e.Why, e.Name, how)
}

// GitDir says whether a directory is a git directory to git (setup.c,
// is_git_directory), given which entries it holds: HEAD, and objects/ with
// refs/, or commondir (a linked worktree's git directory). A writer asks it with the name it is about to
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

// maxGitfile bounds what ReadGitfile reads: git reads a gitfile's first
// line only.
const maxGitfile = 4096

// ReadGitfile reads a gitfile from r (its first 4 KiB) and returns the
// path it names, absolute (a relative one is taken from dir, the
// gitfile's directory) and clean, not resolved: Tier 2's guard (the root
// package) and Tier 1's (hostop) both read gitfiles with it.
func ReadGitfile(r io.Reader, dir string) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxGitfile))
	if err != nil {
		return "", err
	}
	p, err := ParseGitfile(b)
	if err != nil {
		return "", err
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	return filepath.Clean(p), nil
}
