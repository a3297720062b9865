//go:build linux || darwin

package confine

import (
	"os"
	"path/filepath"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
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
