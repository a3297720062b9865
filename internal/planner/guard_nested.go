//go:build unix

package planner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// maxGuardWalk bounds the directory entries gitGuard reads in the writable
// roots looking for nested repositories.
const maxGuardWalk = 2_000_000

// gitDirRow is guardset's row of a .git itself (in any letter case).
const gitDirRow = "git-dir"

// errGuardWalk: the writable roots hold more than maxGuardWalk entries.
var errGuardWalk = errors.New("too many entries to look for nested repositories in")

// nestedGit returns the git metadata below the top level of root (a
// writable root, canonical) that the guard keeps read-only besides
// guardRoot's: every .git at any depth (a vendored repository, an embedded
// submodule; ".git" in any letter case, which a case-insensitive file
// system the tree is copied to takes for it), and the directory an
// absorbed submodule's or a linked worktree's gitfile names when that lies
// in root outside what is already guarded. It does not descend into a .git,
// into another writable root (walked on its own), nor through symlinks.
// It refuses what guardRoot refuses: a .git that is a symlink or a special
// file, a gitfile naming a directory inside another writable root. budget
// counts the entries read, across the roots.
func nestedGit(root string, rw, guarded []string, budget *int) ([]string, error) {
	var out []string
	isGuarded := func(p string) bool {
		for _, g := range slices.Concat(guarded, out) {
			if spec.Within(p, g) {
				return true
			}
		}
		return false
	}
	err := walkRoot(root, rw, budget, func(dir string, e fs.DirEntry) (bool, error) {
		p := filepath.Join(dir, e.Name())
		t := e.Type()
		row, ok := guardset.Classify(e.Name())
		if !ok || row.Name != gitDirRow {
			return true, nil
		}
		if dir == root && e.Name() == ".git" || isGuarded(p) {
			return false, nil // guardRoot's
		}
		switch {
		case t.IsDir():
			out = append(out, p)
		case t.IsRegular():
			out = append(out, p)
			target, err := gitfileDir(p, dir)
			if err != nil {
				// A file named .git that is no gitfile: git
				// refuses the repository; keep it read-only all
				// the same.
				return false, nil
			}
			if isGuarded(target) {
				return false, nil
			}
			own, err := inOwnRoot(p, target, root, rw)
			if err != nil {
				return false, err
			}
			if own {
				out = append(out, target)
			}
		default:
			return false, fmt.Errorf("%s is a %s, not a directory or a gitfile", p, kindOf(t))
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// walkRoot reads the entries below root (a writable root, canonical),
// depth first, without following symlinks and without entering another
// writable root (walked on its own): visit says, for each entry, whether
// to enter it (when it is a directory). budget counts the entries read,
// across calls; past it the walk fails (errGuardWalk).
func walkRoot(root string, rw []string, budget *int, visit func(dir string, e fs.DirEntry) (enter bool, err error)) error {
	stack := []string{root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		es, err := readDirEntries(dir)
		if err != nil {
			if dir == root {
				return err
			}
			// Unreadable (or gone): what the command cannot list it
			// cannot find anything in either.
			continue
		}
		if *budget -= len(es); *budget < 0 {
			return fmt.Errorf("%w: more than %d below %s", errGuardWalk, maxGuardWalk, root)
		}
		for _, e := range es {
			enter, err := visit(dir, e)
			if err != nil {
				return err
			}
			p := filepath.Join(dir, e.Name())
			if enter && e.Type().IsDir() && !slices.Contains(rw, p) {
				stack = append(stack, p)
			}
		}
	}
	return nil
}

// readDirEntries lists dir without following a symlink at its end (the
// walk must stay below the root it started at).
func readDirEntries(dir string) ([]fs.DirEntry, error) {
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	es, err := f.ReadDir(-1)
	if err != nil && !errors.Is(err, io.EOF) {
		return es, err
	}
	return es, nil
}

// ReportedRepos are the git directories the persistence report watches
// (persist.Take's repos): the guarded paths; where the profile waives the
// guard, the work tree's nested repositories all the same (the report is
// then all there is), as far as nestedGit finds them.
func ReportedRepos(worktree string, guarded, waive []string) []string {
	if !slices.Contains(waive, spec.GGitPersistence) {
		return guarded
	}
	budget := maxGuardWalk
	repos, _ := nestedGit(worktree, []string{worktree}, nil, &budget)
	return repos
}
