//go:build unix

package planner

import (
	"fmt"
	"slices"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Roots are a run's roots as the OS's launch canonicalised them, each its
// own way: Linux resolves symlinks, macOS resolves them as Seatbelt
// matches paths (seatbelt.Canon).
type Roots struct {
	// Dir is the command's working directory.
	Dir string
	// Writable are the writable roots, the work tree first.
	Writable []string
	// System are the system's read-only roots every run has; Asked the
	// read-only roots the profile and the spec ask for.
	System, Asked []string
	// Split turns an asked root into its grants and the credential files
	// left out of them, keeping out the paths in keep (confine's control
	// paths) too: credpath.SplitReadGrant on Linux, where Landlock cannot
	// deny a part of a grant. Nil: the root is the grant (Seatbelt denies
	// the credential files inside it instead).
	Split func(root string, keep ...string) (grants, hidden []string, err error)
}

// Checked is what CheckRun resolved for a run.
type Checked struct {
	// Guarded are the paths the persistence guard keeps read-only
	// (GitGuard).
	Guarded []string
	// ReadOnly is everything the command may read and execute besides
	// the writable roots: System, then the grants of Asked; Hidden the
	// credential files Split left out.
	ReadOnly, Hidden []string
	// Env is the command's environment (HOME and TMPDIR come later, with
	// the private directory), Omitted the PATH components left out, Prog
	// the program as the run finds it.
	Env, Omitted []string
	Prog         string
}

// CheckRun is the validation every OS's launch runs on a run of s under
// prof whose roots are r, so that Linux and macOS refuse the same inputs
// with the same words, in this order: a spec may not widen its profile's
// network; the writable roots' rules (CheckWritableRoots, CheckControl);
// the persistence guard (GitGuard); no asked read-only root inside one of
// confine's control paths (control); the command's environment and
// program (CommandEnv), a program outside the roots refused with the
// grant that would show it (outsideView). callerPATH is the caller's
// PATH, not the run's. It creates nothing.
func CheckRun(s *spec.CommandSpec, prof policy.Profile, r Roots, control []ctlpaths.Path, callerPATH string) (Checked, error) {
	var c Checked
	if s.Network == spec.Allowlist && prof.Network != spec.Allowlist {
		return c, fmt.Errorf("%w: the spec asks for network %q but profile %q is %q; a spec cannot widen its profile's network", spec.ErrInvalidSpec, s.Network, prof.Name, spec.DenyAll)
	}
	waive := prof.Waives()
	if err := CheckWritableRoots(r.Writable, waive); err != nil {
		return c, err
	}
	if err := CheckControl(r.Writable, control); err != nil {
		return c, err
	}
	var err error
	if c.Guarded, err = GitGuard(r.Writable, waive); err != nil {
		return c, err
	}
	if c.ReadOnly, c.Hidden, err = readOnly(r, control); err != nil {
		return c, err
	}
	c.Env, c.Omitted, c.Prog, err = CommandEnv(s, prof.Env.Waive, c.ReadOnly, r.Writable, callerPATH, r.Dir)
	if err != nil {
		return c, outsideView(s.Program, r.Dir, callerPATH, append(slices.Clone(c.ReadOnly), r.Writable...), err)
	}
	return c, nil
}

// readOnly refuses an asked read-only root inside a control path and
// returns r's read-only grants and the credential files they leave out.
func readOnly(r Roots, control []ctlpaths.Path) (ro, hidden []string, err error) {
	ro = slices.Clone(r.System)
	keep := make([]string, 0, len(control))
	for _, p := range control {
		keep = append(keep, p.Path)
	}
	for _, a := range r.Asked {
		for _, p := range control {
			if spec.Within(a, p.Path) {
				return nil, nil, fmt.Errorf("%w: %s: read-only root %s lies inside its %s %s", spec.ErrUnavailable, ControlGuarantee, a, p.What, p.Path)
			}
		}
		if r.Split == nil {
			ro = append(ro, a)
			continue
		}
		grants, excluded, err := r.Split(a, keep...)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		ro = append(ro, grants...)
		hidden = append(hidden, excluded...)
	}
	return ro, hidden, nil
}
