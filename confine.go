//go:build linux

package confine

import (
	"context"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/linuxrun"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Backend names the core provider: Landlock, seccomp (with user
// notification), rlimits and a subreaping supervisor. It works wherever
// the kernel has Landlock and seccomp, stock Docker and Kubernetes
// included, and enforces every guarantee on its own.
const Backend = provider.Core

// BackendNamespaces names the provider selected where unprivileged user
// namespaces work: the core inside new user, PID, mount, network, IPC and
// UTS namespaces, which add defence in depth to several guarantees.
const BackendNamespaces = provider.Namespaces

// BackendBubblewrap names the provider that only runs when asked for
// (Launcher.Backend "bwrap"): the core inside the namespaces and the
// roots-only mount tree that bubblewrap builds.
const BackendBubblewrap = provider.Bubblewrap

// Init must be called first thing in main by every program that calls
// RunCommand. A run re-executes the program itself as its helpers (the
// reaper that cleans up when the caller dies, bubblewrap's supervisor and
// init); Init turns such a re-execution into that helper and never
// returns there, and returns at once in the program's own start. Without
// it RunCommand refuses (spec.ErrLaunch).
func Init() { launch.Init() }

// hostileTier lets a tier 3 profile through admission: the provider
// selection refuses it, naming the microVM backend it would need.
func hostileTier() error { return nil }

// landlockABI is the event log's Landlock ABI: the host's.
func landlockABI() int { return host.Probe().LandlockABI }

// launch runs s on Linux (linuxrun.Launch) with this launcher's settings,
// filling in res.
func (l *Launcher) launch(ctx context.Context, c *policy.Cap, prof policy.Profile, s spec.CommandSpec, limits spec.Limits, res *spec.CommandResult) error {
	ce := l.callerEnv()
	return linuxrun.Launch(ctx, linuxrun.Request{
		Cap: c, Profile: prof, Spec: s, Limits: limits, Backend: l.Backend,
		CallerEnv: ce, ControlPaths: func(runUID int) []ctlpaths.Path { return ctlpaths.ForRun(ce.get, runUID, l.EventLog, l.ControlPaths) },
		Acquire: l.acquire, Release: l.release,
		PrivateDir: l.Warm.privateDir, RefillPrivate: l.Warm.refillPrivate, NetPool: l.Warm.netPool,
		LiveStdout: l.LiveStdout, LiveStderr: l.LiveStderr, LiveLimit: l.LiveLimit, Stdin: l.Stdin,
		DetachCleanup: l.DetachCleanup,
	}, res)
}

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: half the machine's RAM, at most the caller's own cgroup
// limit (host.DefaultMemoryBound); fallback where RAM is unknown.
func defaultMemory(fallback int64) int64 { return host.DefaultMemoryBound(fallback) }
