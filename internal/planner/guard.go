//go:build unix

package planner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// GitGuard returns the paths the persistence guard keeps read-only for a
// run whose writable roots are rw (canonical, the work tree first): each
// root's .git, a directory or a gitfile, and the directory a gitfile names
// when that lies inside the same root; then every nested repository's
// (nestedGit). None where no root has a .git, or
// when the profile waives the guarantee. It refuses what it cannot guard:
// a .git that is a symlink or a special file, a gitfile naming a directory
// inside another writable root, and a writable root inside a guarded path.
func GitGuard(rw []string, waive []string) ([]string, error) {
	if slices.Contains(waive, spec.GGitPersistence) {
		return nil, nil
	}
	refuse := func(why string) ([]string, error) {
		return nil, guardRefusal(why)
	}
	var guarded []string
	for _, r := range rw {
		g, err := guardRoot(r, rw)
		if err != nil {
			return refuse(err.Error())
		}
		for _, p := range g {
			if !slices.Contains(guarded, p) {
				guarded = append(guarded, p)
			}
		}
	}
	budget := maxGuardWalk
	for _, r := range rw {
		nested, err := nestedGit(r, rw, guarded, &budget)
		if err != nil {
			return refuse(err.Error())
		}
		for _, p := range nested {
			if !slices.Contains(guarded, p) {
				guarded = append(guarded, p)
			}
		}
	}
	for _, r := range rw {
		for _, g := range guarded {
			if spec.Within(r, g) {
				return refuse(fmt.Sprintf("writable root %s lies inside %s", r, g))
			}
		}
	}
	return guarded, nil
}

// guardRefusal is the error of a run the guard cannot keep.
func guardRefusal(why string) error {
	return fmt.Errorf("%w: %w: %s: %s; waive %s in the profile to let the command write it (its changes are then reported)",
		spec.ErrUnavailable, ErrGuard, spec.GGitPersistence, why, spec.GGitPersistence)
}

// guardRoot is gitGuard for one writable root.
func guardRoot(root string, rw []string) ([]string, error) {
	git := filepath.Join(root, ".git")
	st, err := os.Lstat(git)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, err
	}
	guarded := []string{git}
	switch {
	case st.IsDir():
	case st.Mode().IsRegular():
		// A gitfile ("gitdir: <path>"): a linked worktree or a submodule.
		dir, err := gitfileDir(git, root)
		if err != nil {
			return nil, err
		}
		own, err := inOwnRoot(git, dir, root, rw)
		if err != nil {
			return nil, err
		}
		if own {
			guarded = append(guarded, dir)
		}
	default:
		return nil, fmt.Errorf("%s is a %s, not a directory or a gitfile", git, kindOf(st.Mode()))
	}
	return guarded, nil
}

// gitfileDir reads a gitfile's "gitdir: <path>" (relative to the work
// tree when not absolute) and resolves it.
func gitfileDir(file, worktree string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	p, err := guardset.ReadGitfile(f, worktree)
	if err != nil {
		return "", fmt.Errorf("%s: %v", file, err)
	}
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%s names git directory %s: %v", file, p, err)
	}
	return r, nil
}

// inOwnRoot says the git directory dir that gitfile file in writable
// root root names is the guard's to keep: it lies inside a writable root,
// which must be root (the guard keeps only its own root's entries); a
// dir outside every writable root the command cannot write anyway.
func inOwnRoot(file, dir, root string, rw []string) (bool, error) {
	for _, r := range rw {
		if spec.Within(dir, r) {
			if !spec.Within(dir, root) {
				return false, fmt.Errorf("%s names git directory %s, inside writable root %s; the guard keeps only its own root's entries", file, dir, r)
			}
			return true, nil
		}
	}
	return false, nil
}

func kindOf(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeNamedPipe != 0:
		return "fifo"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m&fs.ModeDevice != 0:
		return "device"
	}
	return "special file"
}
