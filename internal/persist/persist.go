//go:build linux

// Package persist finds what a run changed among the paths of its work
// tree that something outside the sandbox may execute later: git's hooks
// and configuration, nested repositories, shell rc files, editor task
// files. It reports; the persistence guard (no-git-persistence: Landlock
// grants around .git under the core, a read-only bind with namespaces)
// prevents writes to .git itself, and a waiver turns the guard off, which
// leaves this report (see docs/tier1.md, "Persistence guard").
//
// A snapshot is one lstat per watched path (and a directory read for
// .git/hooks, .git/modules, .git/worktrees and for the work tree's top
// level, whose directories may hold a nested .git), plus the repositories
// the launcher found at any depth when the run began (Take's repos): no
// tree walk of its own, so a .git created during the run deeper than one
// level below the work tree (other than at a .gitmodules path) is not
// seen; the guard refuses those.
package persist

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/spec"
)

// Kinds of change.
const (
	Created  = "created"
	Modified = "modified"
	Removed  = "removed"
)

// watch is one watched path, relative to the work tree. dir: its entries
// are watched one by one too.
type watch struct {
	path, what string
	dir        bool
}

// watched is the table of paths a later program on the host may execute
// or obey.
var watched = []watch{
	{".git", "git directory", false},
	{".git/config", "git configuration", false},
	{".git/config.worktree", "git configuration", false},
	{".git/info/attributes", "git attributes", false},
	{".git/hooks", "git hooks", true},
	{".git/commondir", "git directory pointer", false},
	{".gitmodules", "git submodules", false},
	{".bashrc", "shell rc file", false},
	{".bash_profile", "shell rc file", false},
	{".bash_login", "shell rc file", false},
	{".bash_logout", "shell rc file", false},
	{".profile", "shell rc file", false},
	{".zshrc", "shell rc file", false},
	{".zshenv", "shell rc file", false},
	{".zprofile", "shell rc file", false},
	{".zlogin", "shell rc file", false},
	{".envrc", "direnv rc file", false},
	{".vscode/tasks.json", "editor task file", false},
	{".vscode/launch.json", "editor task file", false},
	{".vscode/settings.json", "editor settings", false},
	{".devcontainer/devcontainer.json", "dev container definition", false},
	{".devcontainer.json", "dev container definition", false},
	{".idea/workspace.xml", "editor task file", false},
}

type fingerprint struct {
	mode         uint32
	ino, dev     uint64
	size         int64
	mtime, ctime unix.Timespec
	what         string
}

// Snapshot is the state of the watched paths of one work tree.
type Snapshot map[string]fingerprint

// repoWatched are the paths watched in every repository's git directory
// besides the top level's own (watched): a nested repository's, a
// submodule's under .git/modules, a gitfile's target.
var repoWatched = []watch{
	{"", "nested git repository", false},
	{"config", "git configuration", false},
	{"config.worktree", "git configuration", false},
	{"info/attributes", "git attributes", false},
	{"hooks", "git hooks", true},
	{"commondir", "git directory pointer", false},
}

// Watch is a path a caller adds to the table (TakeWith): relative to the
// work tree, with what it is; a directory's entries are watched too.
type Watch struct {
	Path, What string
}

// Take records the watched paths of worktree (absolute), and those of the
// git directories repos (absolute, a nested .git, a gitfile or the
// directory one names; those outside worktree are left out).
func Take(worktree string, repos ...string) Snapshot {
	return TakeWith(worktree, nil, repos...)
}

// TakeWith is Take with the paths extra watched too (a profile's rows of
// the persistence guard; those not local to worktree are left out).
func TakeWith(worktree string, extra []Watch, repos ...string) Snapshot {
	s := Snapshot{}
	stat := func(rel, what string) bool {
		var st unix.Stat_t
		if unix.Lstat(filepath.Join(worktree, rel), &st) != nil {
			return false
		}
		s[rel] = fingerprint{mode: st.Mode, ino: st.Ino, dev: st.Dev, size: st.Size, mtime: st.Mtim, ctime: st.Ctim, what: what}
		return true
	}
	for _, w := range watched {
		if stat(w.path, w.what) && w.dir {
			for _, n := range names(filepath.Join(worktree, w.path)) {
				stat(filepath.Join(w.path, n), w.what)
			}
		}
	}
	// Nested repositories: in each top-level directory, and at each path
	// .gitmodules declares.
	for _, n := range names(worktree) {
		if n != ".git" {
			stat(filepath.Join(n, ".git"), "nested git repository")
		}
	}
	for _, p := range submodulePaths(filepath.Join(worktree, ".gitmodules")) {
		stat(filepath.Join(p, ".git"), "nested git repository")
	}
	repo := func(rel string) {
		for _, w := range repoWatched {
			p := filepath.Join(rel, w.path)
			if stat(p, w.what) && w.dir {
				for _, n := range names(filepath.Join(worktree, p)) {
					stat(filepath.Join(p, n), w.what)
				}
			}
		}
	}
	// Absorbed submodules' and linked worktrees' git directories.
	for _, sub := range []string{".git/modules", ".git/worktrees"} {
		for _, n := range names(filepath.Join(worktree, sub)) {
			repo(filepath.Join(sub, n))
		}
	}
	for _, r := range repos {
		if rel, err := filepath.Rel(worktree, r); err == nil && filepath.IsLocal(rel) && rel != ".git" {
			repo(rel)
		}
	}
	for _, n := range names(filepath.Join(worktree, ".idea", "runConfigurations")) {
		stat(filepath.Join(".idea", "runConfigurations", n), "editor run configuration")
	}
	for _, w := range extra {
		if !filepath.IsLocal(w.Path) {
			continue
		}
		if stat(w.Path, w.What) {
			for _, n := range names(filepath.Join(worktree, w.Path)) {
				stat(filepath.Join(w.Path, n), w.What)
			}
		}
	}
	return s
}

// names lists a directory's entries, at most 4096 of them.
func names(dir string) []string {
	f, err := os.Open(dir)
	if err != nil {
		return nil
	}
	defer f.Close()
	ns, _ := f.Readdirnames(4096)
	return ns
}

// submodulePaths reads the "path = X" lines of a .gitmodules file (at most
// 64 KiB), keeping relative paths without "..".
func submodulePaths(file string) []string {
	f, err := os.Open(file)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(&limited{f, 64 << 10})
	for sc.Scan() {
		k, v, ok := strings.Cut(string(bytes.TrimSpace(sc.Bytes())), "=")
		if !ok || strings.TrimSpace(k) != "path" {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"`)
		if filepath.IsLocal(v) {
			out = append(out, filepath.Clean(v))
		}
	}
	return out
}

type limited struct {
	f *os.File
	n int
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, os.ErrDeadlineExceeded
	}
	if len(p) > l.n {
		p = p[:l.n]
	}
	k, err := l.f.Read(p)
	l.n -= k
	return k, err
}

// Diff lists what changed from before to after, by path.
func Diff(before, after Snapshot) []spec.Persistence {
	var out []spec.Persistence
	for p, a := range after {
		b, ok := before[p]
		switch {
		case !ok:
			out = append(out, spec.Persistence{Path: p, Kind: Created, What: a.what})
		case a.mode&unix.S_IFMT == unix.S_IFDIR && b.mode&unix.S_IFMT == unix.S_IFDIR && a.ino == b.ino && a.dev == b.dev:
			// A directory's own times change with every entry; its
			// entries are watched by name where it matters.
		case a != b:
			out = append(out, spec.Persistence{Path: p, Kind: Modified, What: a.what})
		}
	}
	for p, b := range before {
		if _, ok := after[p]; !ok {
			out = append(out, spec.Persistence{Path: p, Kind: Removed, What: b.what})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
