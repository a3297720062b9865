//go:build linux

package confine

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/spec"
)

// controlPaths are confine's own control surfaces a run must not reach
// (docs/control-plane.md): the defaults of the caller's environment and of
// this process's, for this process's uid and, when the command runs as
// another (root launching as the work tree's owner), for that uid; the
// run's event log; and what the launcher names (Launcher.ControlPaths: the
// server's socket directory, an explicit --cap-key).
func (l *Launcher) controlPaths(callerEnv envLookup, runUID int) []ctlpaths.Path {
	euid := os.Geteuid()
	srcs := []ctlpaths.Source{{Getenv: callerEnv.get, UID: euid}, {Getenv: os.Getenv, UID: euid}}
	if runUID >= 0 && runUID != euid {
		srcs = append(srcs, ctlpaths.Source{UID: runUID})
	}
	ps := ctlpaths.FindAll(srcs...)
	if l.EventLog != "" {
		if a, err := filepath.Abs(l.EventLog); err == nil {
			ps = ctlpaths.AddLog(ps, a)
		}
	}
	for _, p := range l.ControlPaths {
		if a, err := filepath.Abs(p); err == nil {
			ps = ctlpaths.Add(ps, "control path named by the launcher", a)
		}
	}
	return ps
}

// checkControl refuses a writable root that covers a control surface or
// lies inside one: Landlock cannot take a part of a writable directory
// back, and a command that may create the surface's path could plant a
// key or a symlink the host's confine would then use. No profile waives
// it.
func checkControl(rw []string, ps []ctlpaths.Path) error {
	for _, r := range rw {
		if p, ok := ctlpaths.Overlap(r, ps); ok {
			return fmt.Errorf("%w: %s: its %s %s is inside writable root %s, where the command could reach it; choose a work directory (and --rw roots) that does not contain it",
				spec.ErrUnavailable, controlGuarantee, p.What, p.Path, r)
		}
	}
	return nil
}

// controlGuarantee names the rule in refusals (it is part of
// no-credential-files and no-foreign-unix-sockets in the ledger, and not
// waivable).
const controlGuarantee = "confine's control plane"
