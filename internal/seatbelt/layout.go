package seatbelt

import (
	"fmt"
	"slices"

	"github.com/confine-sandbox/confine/spec"
)

// Roots is what a run asks to touch, as its caller wrote the paths.
type Roots struct {
	Worktree, Dir       string
	ReadOnly, ReadWrite []string
}

// Layout is Roots canonicalised: every path as the macOS kernel resolves
// it, so as Seatbelt matches it.
type Layout struct {
	Worktree, Dir string
	// Writable is the worktree, then the read-write roots.
	Writable []string
	// ReadExec is SystemReadExec, then the read-only roots.
	ReadExec []string
	// Deny is every credential path under the read-only roots
	// (CredentialDenies).
	Deny []string
}

// Layout canonicalises r. A path that cannot be canonicalised fails the
// run (ErrCanonical and spec.ErrInvalidSpec, naming its role), never
// embeds unresolved; so does a Dir that resolves outside the worktree.
func (c Canon) Layout(r Roots) (Layout, error) {
	fail := func(role string, err error) (Layout, error) {
		return Layout{}, fmt.Errorf("%w: %s: %w", spec.ErrInvalidSpec, role, err)
	}
	var l Layout
	var err error
	if l.Worktree, err = c.Path(r.Worktree); err != nil {
		return fail("worktree", err)
	}
	l.Dir = l.Worktree
	if r.Dir != "" {
		if l.Dir, err = c.Path(r.Dir); err != nil {
			return fail("dir", err)
		}
		if !spec.Within(l.Dir, l.Worktree) {
			return Layout{}, fmt.Errorf("%w: dir %q resolves outside worktree %q", spec.ErrInvalidSpec, l.Dir, l.Worktree)
		}
	}
	l.Writable = []string{l.Worktree}
	for _, p := range r.ReadWrite {
		cp, err := c.Path(p)
		if err != nil {
			return fail("read-write root", err)
		}
		l.Writable = append(l.Writable, cp)
	}
	l.ReadExec = SystemReadExec()
	for _, p := range r.ReadOnly {
		cp, err := c.Path(p)
		if err != nil {
			return fail("read-only root", err)
		}
		l.ReadExec = append(l.ReadExec, cp)
		l.Deny = append(l.Deny, c.CredentialDenies(cp)...)
	}
	return l, nil
}

// Spec is the profile's input for this layout, the run's canonical
// scratch directory and the device nodes it may use.
func (l Layout) Spec(scratch string, devices []string) Spec {
	return Spec{Worktree: l.Worktree, Scratch: scratch, ReadExec: slices.Clone(l.ReadExec),
		ReadWrite: slices.Clone(l.Writable[1:]), Devices: slices.Clone(devices), Deny: slices.Clone(l.Deny)}
}
