//go:build darwin

package confine

import (
	"context"
	"fmt"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/seatbelt"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Backends names the backends this build can run.
func Backends() []string { return []string{seatbelt.Name} }

// hostileTier refuses a tier 3 profile: it needs a microVM, and macOS
// has none.
func hostileTier() error {
	return fmt.Errorf("%w: tier 3 (hostile) needs a microVM backend; macOS has none", spec.ErrUnavailable)
}

// landlockABI is the event log's Landlock ABI: none on macOS.
func landlockABI() int { return 0 }

// launch runs s under sandbox-exec (seatbelt.Launch), filling in res.
func (l *Launcher) launch(ctx context.Context, _ *policy.Cap, prof policy.Profile, s spec.CommandSpec, limits spec.Limits, res *spec.CommandResult) error {
	ce := l.callerEnv()
	return seatbelt.Launch(ctx, seatbelt.Request{Backend: l.Backend, Profile: prof, Spec: s, Limits: limits,
		ControlPaths: ctlpaths.ForRun(ce.get, -1, l.EventLog, l.ControlPaths), PATH: ce.get("PATH"), Acquire: l.acquire, Release: l.release,
		LiveStdout: l.LiveStdout, LiveStderr: l.LiveStderr, LiveLimit: l.LiveLimit, Stdin: l.Stdin}, res)
}

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: the built-in default on macOS.
func defaultMemory(fallback int64) int64 { return fallback }
