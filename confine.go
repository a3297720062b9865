//go:build linux

// Package confine runs one untrusted command confined by unprivileged kernel
// facilities (Landlock, seccomp-BPF, rlimits, no_new_privs) and returns a
// bounded, structured result. RunCommand is the only way to execute
// anything, and it needs a capability minted by the policy engine.
//
// Where unprivileged user namespaces work, the command also runs in user,
// PID, mount, network, IPC and UTS namespaces of its own (the
// landlock+namespaces backend); elsewhere, as in stock Docker, the core
// (landlock+seccomp) enforces every guarantee alone. The result names the
// backend, its layers and why the other backends were skipped.
//
// A program that calls RunCommand re-executes itself as the run's
// helpers: the reaper and, under bubblewrap, its supervisor and init (see Init); nothing needs to be
// installed besides that program.
package confine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/persist"
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
	// use: "namespaces" (landlock+namespaces), "core" (landlock+seccomp),
	// "bwrap" (bubblewrap: the core inside namespaces bwrap creates, where
	// bwrap is installed and can create them; never selected otherwise);
	// "firecracker" and "container" are refused as unavailable.
	// Left empty, the first available provider in the registry's order is
	// selected (see internal/provider).
	Backend string
	// DetachCleanup lets RunCommand return as soon as the command's tree
	// is gone, leaving the removal of the run's private directory (and
	// pids cgroup) to the run's init, which does it right after; for a
	// caller that does not wait on it, like the CLI, which exits next.
	// Only the landlock+namespaces provider detaches.
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
// RunCommand. A run re-executes the program itself as its helpers (the
// reaper that cleans up when the caller dies, bubblewrap's supervisor and
// init); Init turns such a re-execution into that helper and never
// returns there, and returns at once in the program's own start. Without
// it RunCommand refuses (spec.ErrLaunch).
func Init() { launch.Dispatch() }

// RunCommand runs s under the profile that c is bound to. It refuses a nil,
// forged, revoked, expired or mismatched capability, an invalid spec, and
// any guarantee the host cannot enforce that the profile does not waive,
// before anything is spawned.
func RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (spec.CommandResult, error) {
	return defaultLauncher.RunCommand(ctx, c, s)
}

// RunCommand is the package-level RunCommand with this launcher's settings.
func (l *Launcher) RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (res spec.CommandResult, err error) {
	res.RunID = eventlog.NewRunID()
	var prof policy.Profile
	if l.EventLog != "" {
		defer func() { l.record(c, prof, s, res, err) }()
	}
	prof, err = policy.Authorize(c, s.Profile)
	if err != nil {
		return res, err
	}
	if prof.Tier != policy.TierHostile {
		// Tier 3 is refused by the provider selection, which names the
		// microVM backend it would need.
		if err := policy.CheckTier(prof.Tier); err != nil {
			return res, err
		}
	}
	if err := s.Validate(); err != nil {
		return res, err
	}
	h := host.Probe()
	if bp, ok := provider.Lookup(l.Backend); ok && bp.Name() == provider.Bubblewrap {
		// Only a run that asks for bwrap pays for starting it once.
		h = host.ProbeBwrap(h)
	}
	limits := mergeLimits(prof.Limits, s.Limits)
	in, err := validate(&s, prof, h, limits)
	if err != nil {
		return res, err
	}
	if len(s.Approvals) > 0 {
		if in.allow == nil {
			return res, fmt.Errorf("%w: egress approvals need a profile with network = %q", spec.ErrInvalidSpec, spec.Allowlist)
		}
		if in.grants, err = policy.VerifyGrants(c, s.Approvals, s.TaskID); err != nil {
			return res, err
		}
	}
	named := l.Backend != "" && l.Backend != "auto"
	sel, err := provider.Select(h, provider.Request{Tier: prof.Tier, RequireNamespaces: prof.RequireNamespaces, Backend: l.Backend,
		Enforce: func(p provider.Provider) error { _, err := in.guarantees(p); return err }})
	res.SkippedBackends = sel.Skipped
	if err != nil {
		return res, err
	}
	// The cap bounds what a run holds (temp dir, cgroup) too, so take a
	// slot before preparing.
	if l.sem != nil {
		select {
		case l.sem <- struct{}{}:
			defer func() { <-l.sem }()
		case <-ctx.Done():
			return res, fmt.Errorf("waiting for a run slot: %w", ctx.Err())
		}
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	if in.allow != nil {
		if in.egress, err = startEgress(in.allow, in.grants, res.RunID, &s); err != nil {
			return res, err
		}
		defer func() { res.Connections = in.egress.stop() }()
	}
	run, err := in.prepare(sel.Provider, prof.RequireNamespaces || named)
	if err != nil {
		return res, err
	}
	detached := false
	defer func() {
		if !detached {
			run.cleanup()
		}
	}()
	res.PathOmitted = in.omitted
	res.Caches = run.caches
	res.HiddenCredentials = in.hidden
	run.primary.describe(&res)

	pio := launch.IO{OutputLimit: limits.OutputBytes, LiveLimit: l.LiveLimit, Stdout: l.LiveStdout, Stderr: l.LiveStderr,
		DetachCleanup: l.DetachCleanup}
	if in.egress != nil {
		pio.Egress = in.egress.hooks()
	}
	switch {
	case l.Stdin != nil:
		pio.Stdin = l.Stdin
	case s.Stdin != nil:
		pio.Stdin = strings.NewReader(string(s.Stdin))
	}
	if err := run.tmp.Wait(); err != nil {
		return res, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	// What the run changes among the paths a host program may execute
	// later (git hooks and config, rc and editor task files) is reported.
	before := persist.Take(in.worktree)
	start := time.Now()
	out, err := launch.Run(ctx, run.primary.plan, run.fallback(), pio)
	res.Duration = time.Since(start)
	res.Persistence = persist.Diff(before, persist.Take(in.worktree))
	detached = out != nil && out.CleanupDetached
	if out != nil {
		res.Stdout, res.Stderr = out.Stdout, out.Stderr
		if out.Ran != nil && out.Ran != run.primary.plan {
			// The namespaces could not be set up: the core's own plan
			// ran, and the result is that plan's.
			run.core.describe(&res)
			res.SkippedBackends = fellBack(res.SkippedBackends, run.primary.backend, out.Report.NamespacesSkipped)
		}
		if out.NoPidsCgroup {
			// Waived, and it could not be created.
			res.Layers = slices.DeleteFunc(res.Layers, func(l string) bool { return l == "pids-cgroup" })
		}
	}
	if err != nil {
		return res, err
	}
	r := out.Report
	switch r.StartCode {
	case 0:
	case 126:
		return res, fmt.Errorf("%w: %s", spec.ErrNotExecutable, r.StartErr)
	case 127:
		return res, fmt.Errorf("%w: %s", spec.ErrNotFound, r.StartErr)
	default:
		return res, fmt.Errorf("%w: %s", spec.ErrLaunch, r.StartErr)
	}
	res.ExitCode, res.Signal = r.ExitCode, r.Signal
	res.TimedOut, res.Cancelled, res.Killed = r.TimedOut, r.Cancelled, r.Killed
	res.Survivors = r.Survivors
	res.Denials = r.Denials
	res.Usage = spec.Usage{UserCPU: r.UserCPU, SysCPU: r.SysCPU, MaxRSSKB: r.MaxRSSKB, PeakMemoryBytes: r.MemoryPeak}
	res.OOMKilled = r.OOMKilled
	if r.Cancelled && ctx.Err() != nil {
		return res, fmt.Errorf("run cancelled: %w", ctx.Err())
	}
	return res, nil
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

// record appends the run, or its refusal, to the event log. A log that
// cannot be written does not change the run's outcome; it goes to
// EventLogError.
func (l *Launcher) record(c *policy.Cap, prof policy.Profile, s spec.CommandSpec, res spec.CommandResult, runErr error) {
	e := eventlog.Event{RunID: res.RunID, Backend: res.Backend, Layers: res.Layers}
	if c != nil {
		e.CapabilityID, e.Scope = c.ID(), c.Scope()
	}
	e.SetSpec(s)
	e.SetResult(res)
	if prof.Name != "" {
		e.Profile, e.Tier = prof.Name, int(prof.Tier)
	} else if c != nil {
		e.Profile = c.Profile()
	}
	e.LandlockABI = host.Probe().LandlockABI
	if runErr != nil {
		e.Error = eventlog.RedactEnv(runErr.Error(), s.Env)
	}
	lg, err := eventlog.Open(l.EventLog, eventlog.DefaultMaxBytes, eventlog.DefaultKeep)
	if err == nil {
		err = lg.Record(e)
		lg.Close()
	}
	if err != nil && l.EventLogError != nil {
		l.EventLogError(fmt.Errorf("event log %s: %w", l.EventLog, err))
	}
}

func canonicalDir(p string) (string, error) {
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(c)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", p)
	}
	return c, nil
}

func randHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
