//go:build linux || darwin

package confine

import (
	"os"
)

// envLookup reads one variable of the caller's environment (os.LookupEnv
// for a program's own; Launcher.CallerEnv for a server's client).
type envLookup func(name string) (string, bool)

func (l *Launcher) callerEnv() envLookup {
	if l.CallerEnv != nil {
		return l.CallerEnv
	}
	return os.LookupEnv
}

func (e envLookup) get(name string) string {
	v, _ := e(name)
	return v
}
