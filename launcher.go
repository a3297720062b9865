// Package confine runs one untrusted command in a sandbox and returns a
// bounded, structured result. RunCommand is the only way to execute
// anything, and it needs a capability minted by the policy engine.
//
// On Linux the command is confined by unprivileged kernel facilities
// (Landlock, seccomp-BPF, rlimits, no_new_privs). Where unprivileged user
// namespaces work, it also runs in user, PID, mount, network, IPC and UTS
// namespaces of its own (the landlock+namespaces backend); elsewhere, as
// in stock Docker, the core (landlock+seccomp) enforces every guarantee
// alone. The result names the backend, its layers and why the other
// backends were skipped. A program that calls RunCommand re-executes
// itself as the run's helpers: the reaper and, under bubblewrap, its
// supervisor and init (see Init); nothing needs to be installed besides
// that program.
//
// On macOS the command runs under /usr/bin/sandbox-exec with a generated
// Seatbelt profile (the seatbelt backend); what Seatbelt cannot enforce
// is refused by name unless the profile waives it. Elsewhere (Windows)
// there is no backend and RunCommand refuses with spec.ErrUnsupportedOS:
// nothing ever runs unconfined.
package confine

import (
	"context"
	"io"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Launcher runs commands, at most MaxConcurrent at a time. The zero value
// has no cap. It is safe for concurrent use.
type Launcher struct {
	sem chan struct{}
	// LiveStdout and LiveStderr, when set, receive output as it arrives,
	// at most LiveLimit bytes each (0: unlimited). Used by the CLI.
	LiveStdout, LiveStderr io.Writer
	LiveLimit              int64
	// Stdin, when set, is copied to the command instead of spec.Stdin.
	Stdin io.Reader
	// EventLog, when set, is the JSON-lines file every run (and every
	// refusal) is recorded in: names of environment variables, never
	// their values.
	EventLog string
	// EventLogError, when set, hears about runs that could not be
	// recorded; the run's own outcome does not change.
	EventLogError func(error)
	// Backend, when set (and not "auto"), is the only provider a run may
	// use. On Linux: "namespaces" (landlock+namespaces), "core"
	// (landlock+seccomp), "bwrap" (bubblewrap: the core inside namespaces
	// bwrap creates, where bwrap is installed and can create them; never
	// selected otherwise); "firecracker" and "container" are refused as
	// unavailable. Left empty, the first available provider in the
	// registry's order is selected (see internal/provider). Elsewhere see
	// Backends.
	Backend string
	// DetachCleanup lets RunCommand return as soon as the command's tree
	// is gone, leaving the removal of the run's private directory (and
	// pids cgroup) to the run's init, which does it right after; for a
	// caller that does not wait on it, like the CLI, which exits next.
	// Only the landlock+namespaces provider detaches; outside Linux it is
	// accepted for the CLI's sake and ignored.
	DetachCleanup bool
	// CallerEnv, when set, stands for the caller's environment wherever
	// the library consults one: the PATH a spec without its own is derived
	// from, where the private directory and the warm caches live, the
	// variables of credential routes. Nil means this process's
	// (os.LookupEnv). A server running other processes' requests (confine
	// serve) sets it so that nothing of its own environment reaches a
	// command.
	CallerEnv func(name string) (string, bool)
	// ControlPaths are further paths of confine's own control plane no
	// run may reach, besides the defaults (docs/control-plane.md): a
	// server's socket directory, a key file named on the command line.
	ControlPaths []string
	// Warm, when set, is the state this launcher shares with others
	// between runs (NewWarm): a server sets it so that its runs find
	// their private directories made ahead.
	Warm *Warm
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

// RunCommand runs s under the profile that c is bound to. It refuses a nil,
// forged, revoked, expired or mismatched capability, an invalid spec, and
// any guarantee the host cannot enforce that the profile does not waive,
// before anything is spawned (see Launcher.RunCommand).
func RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (spec.CommandResult, error) {
	return defaultLauncher.RunCommand(ctx, c, s)
}
