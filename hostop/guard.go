//go:build linux

package hostop

import (
	"path/filepath"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// The persistence guard on Tier 1 writes (docs/guard-tier1.md). Every
// ConfinedWritePath a Root makes is checked, before anything is created,
// against the protected set (internal/guardset), the same set Tier 2
// keeps read-only:
//
//   - by name: any component .git (a .git directory or gitfile at any
//     depth, whatever lies under it, and creating or removing one), and
//     the editor and shell files;
//   - by content: every directory the write goes through, on the very
//     descriptor the write then uses, must not be a git directory, nor
//     become one by the write (HEAD with objects/ and refs/, or with
//     commondir): a bare repository, a gitfile's target wherever it lies;
//   - the git directory the root's own gitfile names, as Tier 2 guards it.
//
// A refused write fails with guardset.ErrProtected; a reported one
// succeeds and names its row (WriteResult.Guard, PatchedFile.Guard).

// SetGuard sets the guard's policy for writes beneath r (NewHost sets the
// capability's profile's, policy.Profile.GuardPolicy). Without it, the
// defaults: the git set refused, the editor set reported.
func (r *Root) SetGuard(p guardset.Policy) { r.guard = p }

// GitWritePath is WritePath for git's own metadata, for a trusted writer
// alone (hostop/git carrying back what git itself wrote): the persistence
// guard does not apply to it. Never give it a path an untrusted caller
// chose.
func (r *Root) GitWritePath(rel string) (ConfinedWritePath, error) {
	p, err := r.WritePath(rel)
	p.trusted = true
	return p, err
}

// guardWalk is the guard's state during one write's resolution.
type guardWalk struct {
	p        ConfinedWritePath
	reported string // the row of the first reported match
}

// act applies the policy to a match of row e at show.
func (g *guardWalk) act(show string, e guardset.Entry) error {
	switch g.p.root.guard.Action(e) {
	case guardset.Refuse:
		return guardset.Refusal(show, e)
	case guardset.Report:
		if g.reported == "" {
			g.reported = e.Name
		}
	}
	return nil
}

// guardStart checks what needs no walk: the path's name (with the root's
// own, so a root inside a .git counts) and the root's gitfile target.
func (p ConfinedWritePath) guardStart() (*guardWalk, error) {
	g := &guardWalk{p: p}
	if p.trusted {
		return g, nil
	}
	if e, ok := p.root.guard.Classify(p.root.path, p.rel); ok {
		if err := g.act(p.rel, e); err != nil {
			return nil, err
		}
	}
	if t := p.root.gitfileTarget(); t != "" {
		real := p.root.path
		if r, err := filepath.EvalSymlinks(real); err == nil {
			real = r
		}
		if spec.Within(filepath.Join(real, p.rel), t) {
			if err := g.act(p.rel, guardset.GitfileTargetRow()); err != nil {
				return nil, err
			}
		}
	}
	return g, nil
}

// dir checks directory dirfd (show is its path, "" for the root) on the
// way, where the write continues with the entry next.
func (g *guardWalk) dir(dirfd int, show, next string) error {
	if g.p.trusted {
		return nil
	}
	has := func(n string) bool {
		if n == next {
			return true
		}
		_, err := lstatAt(dirfd, n)
		return err == nil
	}
	if guardset.GitDir(has) {
		if show == "" {
			show = "."
		}
		return g.act(show, guardset.GitDirRow())
	}
	return nil
}

// gitfileTarget is the resolved directory the root's .git names when
// .git is a gitfile, else "".
func (r *Root) gitfileTarget() string {
	f, _, err := openRegularAt(r.fd, ".git", ".git", true, false)
	if err != nil {
		return ""
	}
	defer f.Close()
	t, err := guardset.ReadGitfile(f, r.path)
	if err != nil {
		return ""
	}
	if e, err := filepath.EvalSymlinks(t); err == nil {
		return e
	}
	return t
}
