//go:build !linux

// Package confine runs one untrusted command in a sandbox and returns a
// bounded, structured result. RunCommand is the only way to execute
// anything, and it needs a capability minted by the policy engine.
//
// This is the build for an OS other than Linux. On macOS the command runs
// under /usr/bin/sandbox-exec with a generated Seatbelt profile (the
// seatbelt backend); what Seatbelt cannot enforce is refused by name
// unless the profile waives it. Elsewhere (Windows) there is no backend
// and RunCommand refuses with spec.ErrUnsupportedOS: nothing ever runs
// unconfined.
package confine

import (
	"context"
	"io"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Launcher runs commands, at most MaxConcurrent at a time. The zero value
// has no cap. It is safe for concurrent use. Its fields mean what they
// mean on Linux; DetachCleanup has no effect here.
type Launcher struct {
	sem chan struct{}
	// LiveStdout and LiveStderr, when set, receive output as it arrives,
	// at most LiveLimit bytes each (0: unlimited).
	LiveStdout, LiveStderr io.Writer
	LiveLimit              int64
	// Stdin, when set, is copied to the command instead of spec.Stdin.
	Stdin io.Reader
	// EventLog, when set, is the JSON-lines file every run (and every
	// refusal) is recorded in.
	EventLog string
	// EventLogError, when set, hears about runs that could not be
	// recorded.
	EventLogError func(error)
	// Backend, when set (and not "auto"), is the only backend a run may
	// use; see Backends.
	Backend string
	// DetachCleanup is accepted for the CLI's sake and ignored.
	DetachCleanup bool
}

// NewLauncher returns a Launcher that runs at most maxConcurrent commands at
// once (<= 0: no cap).
func NewLauncher(maxConcurrent int) *Launcher {
	l := &Launcher{}
	if maxConcurrent > 0 {
		l.sem = make(chan struct{}, maxConcurrent)
	}
	return l
}

var defaultLauncher = &Launcher{}

// Init must be called first thing in main by every program that calls
// RunCommand. Outside Linux no run re-executes the program, so it returns
// at once; it exists so that one main works everywhere.
func Init() {}

// RunCommand runs s under the profile that c is bound to, or refuses
// before anything is spawned (see Launcher.RunCommand).
func RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (spec.CommandResult, error) {
	return defaultLauncher.RunCommand(ctx, c, s)
}
