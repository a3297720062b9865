//go:build linux

package confine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/denials"
	"github.com/confine-sandbox/confine/internal/egress"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/persist"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/planner"
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

// launch selects the provider, builds the run's plans and runs the
// command, filling in res. It refuses any guarantee the host cannot
// enforce that the profile does not waive, before anything is spawned.
func (l *Launcher) launch(ctx context.Context, c *policy.Cap, prof policy.Profile, s spec.CommandSpec, limits spec.Limits, res *spec.CommandResult) error {
	h := host.Probe()
	if bp, ok := provider.Lookup(l.Backend); ok && bp.Name() == provider.Bubblewrap {
		// Only a run that asks for bwrap pays for starting it once.
		h = host.ProbeBwrap(h)
	}
	ce := l.callerEnv()
	in, err := planner.Validate(&s, prof, h, limits, ce.get("PATH"), func(runUID int) []ctlpaths.Path { return l.controlPaths(ce, runUID) })
	if err != nil {
		return err
	}
	var grants []policy.EgressGrant
	if len(s.Approvals) > 0 {
		if in.Allow == nil {
			return fmt.Errorf("%w: egress approvals need a profile with network = %q", spec.ErrInvalidSpec, spec.Allowlist)
		}
		if grants, err = policy.VerifyGrants(c, s.Approvals, s.TaskID); err != nil {
			return err
		}
	}
	named := l.Backend != "" && l.Backend != "auto"
	sel, err := provider.Select(h, provider.Request{Tier: prof.Tier, RequireNamespaces: prof.RequireNamespaces, Backend: l.Backend,
		Enforce: func(p provider.Provider) error { _, err := in.Guarantees(p); return err }})
	res.SkippedBackends = sel.Skipped
	if err != nil {
		return err
	}
	// The cap bounds what a run holds (temp dir, cgroup) too, so take a
	// slot before preparing.
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
	if err := ctx.Err(); err != nil {
		return err
	}
	var eg *egress.Run
	if in.Allow != nil {
		if eg, err = egress.Start(in.Allow, grants, res.RunID, &s, ce); err != nil {
			return err
		}
		defer func() { res.Connections = eg.Stop() }()
	}
	run, err := prepare(in, ce, l.Warm, eg, sel.Provider, prof.RequireNamespaces || named)
	if err != nil {
		return err
	}
	detached := false
	defer func() {
		run.stopGoProg()
		if !run.tmp.Stable() {
			// Once the run is over: making the next run's directory
			// does not take the CPU from this one.
			l.Warm.refillPrivate(ce.tempDir(), in.UID, in.GID)
		}
		switch {
		case !detached:
			run.cleanup()
		case run.tmp.Stable():
			// The tree is gone; the init's janitor removes the rest. A
			// stable directory is emptied and released here, before the
			// next run in this work directory may take it.
			run.tmp.Remove()
		}
	}()
	res.PathOmitted = in.Omitted
	res.Caches = run.caches
	res.HiddenCredentials = in.Hidden
	run.primary.Describe(res)

	pio := l.runIO(&s, limits, eg)
	if run.primary.Plan.Backend == plan.BackendNamespaces {
		// A server's warm state holds network namespaces made ahead.
		pio.NetPool = l.Warm.netPool()
	}
	if err := run.tmp.Wait(); err != nil {
		return fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	// What the run changes among the paths a host program may execute
	// later (git hooks and config, rc and editor task files) is reported.
	before := persist.TakeWith(in.Worktree, in.Watch, in.Repos...)
	start := time.Now()
	out, err := launch.Run(ctx, run.primary.Plan, run.fallback(), pio)
	res.Duration = time.Since(start)
	res.Persistence = persist.Diff(before, persist.TakeWith(in.Worktree, in.Watch, in.Repos...))
	detached = out != nil && out.CleanupDetached
	if out != nil {
		res.Stdout, res.Stderr = out.Stdout, out.Stderr
		if out.Ran != nil && out.Ran != run.primary.Plan {
			// The namespaces could not be set up: the core's own plan
			// ran, and the result is that plan's.
			run.core.Describe(res)
			res.SkippedBackends = fellBack(res.SkippedBackends, run.primary.Backend, out.Report.NamespacesSkipped)
		}
		if out.NoPidsCgroup {
			// Waived, and it could not be created.
			res.Layers = slices.DeleteFunc(res.Layers, func(l string) bool { return l == "pids-cgroup" })
		}
	}
	if err != nil {
		return err
	}
	if err := reported(res, out.Report); err != nil {
		return in.OutsideView(s.Program, err)
	}
	if res.ExitCode != 0 {
		denials.Infer(denials.Roots{RW: in.RW, RO: in.RO, Hidden: in.Hidden}, res)
	}
	return nil
}

// runIO is the launch's I/O: the output bounds, the live streams, stdin
// (the launcher's, else the spec's) and the egress proxy's hooks.
func (l *Launcher) runIO(s *spec.CommandSpec, limits spec.Limits, eg *egress.Run) launch.IO {
	pio := launch.IO{OutputLimit: limits.OutputBytes, LiveLimit: l.LiveLimit, Stdout: l.LiveStdout, Stderr: l.LiveStderr,
		DetachCleanup: l.DetachCleanup}
	if eg != nil {
		pio.Egress = &launch.Egress{Register: eg.Register, Refused: eg.Refused}
	}
	switch {
	case l.Stdin != nil:
		pio.Stdin = l.Stdin
	case s.Stdin != nil:
		pio.Stdin = strings.NewReader(string(s.Stdin))
	}
	return pio
}

// reported fills res from the run's report: a command that could not
// start is its error.
func reported(res *spec.CommandResult, r plan.Report) error {
	switch r.StartCode {
	case 0:
	case 126:
		return fmt.Errorf("%w: %s", spec.ErrNotExecutable, r.StartErr)
	case 127:
		return fmt.Errorf("%w: %s", spec.ErrNotFound, r.StartErr)
	default:
		return fmt.Errorf("%w: %s", spec.ErrLaunch, r.StartErr)
	}
	res.ExitCode, res.Signal = r.ExitCode, r.Signal
	res.TimedOut, res.Cancelled, res.Killed = r.TimedOut, r.Cancelled, r.Killed
	res.Survivors = r.Survivors
	res.Denials = r.Denials
	res.Usage = spec.Usage{UserCPU: r.UserCPU, SysCPU: r.SysCPU, MaxRSSKB: r.MaxRSSKB, PeakMemoryBytes: r.MemoryPeak}
	res.OOMKilled = r.OOMKilled
	res.MemoryLimitKilled = r.OOMKilled || r.MemoryOver
	return nil
}

// fellBack lists the backend a run left, and why, first among the skipped
// ones (the core, which ran, leaves the list).
func fellBack(skipped []spec.SkippedBackend, left provider.Provider, why string) []spec.SkippedBackend {
	out := []spec.SkippedBackend{{Name: left.Name(), Reason: why}}
	for _, sk := range skipped {
		if sk.Name != provider.Core {
			out = append(out, sk)
		}
	}
	return out
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: half the machine's RAM, at most the caller's own cgroup
// limit (host.DefaultMemoryBound); fallback where RAM is unknown.
func defaultMemory(fallback int64) int64 { return host.DefaultMemoryBound(fallback) }
