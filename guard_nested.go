//go:build unix

package confine

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
	stack := []string{root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		es, err := readDirEntries(dir)
		if err != nil {
			if dir == root {
				return nil, err
			}
			// Unreadable (or gone): what the command cannot list it
			// cannot find a repository in either.
			continue
		}
		if *budget -= len(es); *budget < 0 {
			return nil, fmt.Errorf("%w: more than %d below %s", errGuardWalk, maxGuardWalk, root)
		}
		for _, e := range es {
			p := filepath.Join(dir, e.Name())
			t := e.Type()
			if row, ok := guardset.Classify(e.Name()); ok && row.Name == gitDirRow {
				if dir == root && e.Name() == ".git" || isGuarded(p) {
					continue // guardRoot's
				}
				switch {
				case t.IsDir():
					out = append(out, p)
				case t.IsRegular():
					out = append(out, p)
					target, err := gitfileDir(p, dir)
					if err != nil {
						// A file named .git that is no gitfile:
						// git refuses the repository; keep it
						// read-only all the same.
						continue
					}
					if isGuarded(target) {
						continue
					}
					for _, r := range rw {
						if spec.Within(target, r) {
							if !spec.Within(target, root) {
								return nil, fmt.Errorf("%s names git directory %s, inside writable root %s; the guard keeps only its own root's entries", p, target, r)
							}
							out = append(out, target)
							break
						}
					}
				default:
					return nil, fmt.Errorf("%s is a %s, not a directory or a gitfile", p, kindOf(t))
				}
				continue
			}
			if t.IsDir() && !slices.Contains(rw, p) {
				stack = append(stack, p)
			}
		}
	}
	slices.Sort(out)
	return out, nil
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

// reportedRepos are the git directories the persistence report watches
// (persist.Take's repos): the guarded paths; where the profile waives the
// guard, the work tree's nested repositories all the same (the report is
// then all there is), as far as nestedGit finds them.
func reportedRepos(worktree string, guarded, waive []string) []string {
	if !slices.Contains(waive, spec.GGitPersistence) {
		return guarded
	}
	budget := maxGuardWalk
	repos, _ := nestedGit(worktree, []string{worktree}, nil, &budget)
	return repos
}
