// Package toolhost is the seam between policy's recipes, which decide what
// to ask a toolchain and turn the answers into a profile, and the planning
// side (internal/planner), which asks the host: it runs the discovery
// programs, looks them up on PATH and reads the home directory. policy
// stays free of host programs; the planner installs the host at init.
package toolhost

import (
	"strings"
	"sync/atomic"
)

// Host is what recipe discovery asks of the machine.
type Host struct {
	// LookPath finds prog on PATH.
	LookPath func(prog string) (string, error)
	// Run runs prog (a path) with args and the extra environment
	// entries, and returns its standard output.
	Run func(extraEnv []string, prog string, args ...string) ([]byte, error)
	// Getenv reads the caller's environment.
	Getenv func(name string) string
	// Home is the caller's home directory as the tools see it.
	Home func() string
	// PasswdHome is the user database's home directory, if different.
	PasswdHome func() string
}

// Source makes the hosts: Process asks in this process's environment, In
// in a caller's environment (NAME=VALUE entries).
type Source struct {
	Process func() *Host
	In      func(environ []string) *Host
}

var installed atomic.Pointer[Source]

// Install makes s the host every later discovery asks.
func Install(s Source) { installed.Store(&s) }

// Process is the host in this process's environment, or nil when none is
// installed.
func Process() *Host {
	if s := installed.Load(); s != nil {
		return s.Process()
	}
	return nil
}

// In is the host in environ, or nil when none is installed.
func In(environ []string) *Host {
	if s := installed.Load(); s != nil {
		return s.In(environ)
	}
	return nil
}

// OneLine squeezes a program's message onto one line of at most 300
// bytes, for an error.
func OneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}
