package ctlpaths

import (
	"os"
	"path/filepath"
)

// ForRun are confine's own control surfaces a run must not reach
// (docs/control-plane.md): the defaults of the caller's environment
// (callerEnv) and of this process's, for this process's uid and, when the
// command runs as another (root launching as the work tree's owner), for
// runUID; the run's event log (eventLog, "" for none); and what the
// launcher names (named: a server's socket directory, an explicit
// --cap-key).
func ForRun(callerEnv func(string) string, runUID int, eventLog string, named []string) []Path {
	euid := os.Geteuid()
	srcs := []Source{{Getenv: callerEnv, UID: euid}, {Getenv: os.Getenv, UID: euid}}
	if runUID >= 0 && runUID != euid {
		srcs = append(srcs, Source{UID: runUID})
	}
	ps := FindAll(srcs...)
	if eventLog != "" {
		if a, err := filepath.Abs(eventLog); err == nil {
			ps = AddLog(ps, a)
		}
	}
	for _, p := range named {
		if a, err := filepath.Abs(p); err == nil {
			ps = Add(ps, "control path named by the launcher", a)
		}
	}
	return ps
}
