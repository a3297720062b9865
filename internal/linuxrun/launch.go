//go:build linux

// Package linuxrun is a run on Linux after admission: the host's facts,
// the planner's checks (planner.Validate), the backend's selection by the
// ledger (internal/provider), what the plans name created (prepare: the
// private directory, the cgroups' paths, the warm caches and their
// GOCACHEPROG server, the egress proxy), the plans built, the launch
// (internal/launch), and the result filled in from the plan that ran.
// Package confine's Launcher hands it a Request; macOS's counterpart is
// seatbelt.Launch.
package linuxrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/denials"
	"github.com/confine-sandbox/confine/internal/egress"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/persist"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/internal/warmcache"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Request is one admitted run for Launch: the capability, the profile it
// grants, the spec and its limits, and what the launcher holds (package
// confine's Launcher: the asked backend, the caller's environment and
// confine's control paths, the run slot, the warm state, the streams).
type Request struct {
	Cap     *policy.Cap
	Profile policy.Profile
	Spec    spec.CommandSpec
	Limits  spec.Limits
	// Backend is the only provider the run may use ("" or "auto": the
	// first available in the registry's order).
	Backend string
	// CallerEnv reads the caller's environment.
	CallerEnv func(name string) (string, bool)
	// ControlPaths are confine's own control paths for a command run as
	// runUID (-1: the launcher's own uid).
	ControlPaths func(runUID int) []ctlpaths.Path
	// Acquire takes a run slot before anything is made; Release gives it
	// back.
	Acquire func(context.Context) error
	Release func()
	// PrivateDir makes (or takes, made ahead) the run's private directory
	// under parent for uid:gid; RefillPrivate makes the next ones ahead.
	PrivateDir    func(parent string, uid, gid int) (*tmpdir.Dir, error)
	RefillPrivate func(parent string, uid, gid int)
	// NetPool is the network namespaces made ahead, or nil.
	NetPool func() *nsinit.NetPool
	// LiveStdout and LiveStderr receive output as it arrives, at most
	// LiveLimit bytes each (0: unlimited).
	LiveStdout, LiveStderr io.Writer
	LiveLimit              int64
	// Stdin, when set, is copied to the command instead of Spec.Stdin.
	Stdin io.Reader
	// DetachCleanup leaves the private directory's removal to the run's
	// init (launch.IO.DetachCleanup).
	DetachCleanup bool
}

// tempDir is os.TempDir with $TMPDIR read through e.
func tempDir(e warmcache.Env) string {
	if d := e.Get("TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}

// Launch selects the provider, builds the run's plans and runs the
// command, filling in res. It refuses any guarantee the host cannot
// enforce that the profile does not waive, before anything is spawned.
func Launch(ctx context.Context, r Request, res *spec.CommandResult) error {
	prof, s, limits := r.Profile, r.Spec, r.Limits
	h := host.Probe()
	if bp, ok := provider.Lookup(r.Backend); ok && bp.Name() == provider.Bubblewrap {
		// Only a run that asks for bwrap pays for starting it once.
		h = host.ProbeBwrap(h)
	}
	ce := warmcache.Env(r.CallerEnv)
	in, err := planner.Validate(&s, prof, h, limits, ce.Get("PATH"), r.ControlPaths)
	if err != nil {
		return err
	}
	grants, err := egressGrants(r.Cap, &s, in)
	if err != nil {
		return err
	}
	named := r.Backend != "" && r.Backend != "auto"
	sel, err := provider.Select(h, provider.Request{Tier: prof.Tier, RequireNamespaces: prof.RequireNamespaces, Backend: r.Backend,
		Enforce: func(p provider.Provider) error { _, err := in.Guarantees(p); return err }})
	res.SkippedBackends = sel.Skipped
	if err != nil {
		return err
	}
	// The cap bounds what a run holds (temp dir, cgroup) too, so take a
	// slot before preparing.
	if err := r.Acquire(ctx); err != nil {
		return err
	}
	defer r.Release()
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
	run, err := prepare(in, ce, r.PrivateDir, eg, sel.Provider, prof.RequireNamespaces || named)
	if err != nil {
		return err
	}
	detached := false
	defer func() {
		run.stopGoProg()
		if !run.tmp.Stable() {
			// Once the run is over: making the next run's directory
			// does not take the CPU from this one.
			r.RefillPrivate(tempDir(ce), in.UID, in.GID)
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

	pio := r.runIO(&s, limits, eg)
	if run.primary.Plan.Backend == plan.BackendNamespaces {
		// A server's warm state holds network namespaces made ahead.
		pio.NetPool = r.NetPool()
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

// egressGrants are the spec's egress approvals, verified against c: only
// a run with an allowlist takes them.
func egressGrants(c *policy.Cap, s *spec.CommandSpec, in *planner.Inputs) ([]policy.EgressGrant, error) {
	if len(s.Approvals) == 0 {
		return nil, nil
	}
	if in.Allow == nil {
		return nil, fmt.Errorf("%w: egress approvals need a profile with network = %q", spec.ErrInvalidSpec, spec.Allowlist)
	}
	return policy.VerifyGrants(c, s.Approvals, s.TaskID)
}

// runIO is the launch's I/O: the output bounds, the live streams, stdin
// (the launcher's, else the spec's) and the egress proxy's hooks.
func (r *Request) runIO(s *spec.CommandSpec, limits spec.Limits, eg *egress.Run) launch.IO {
	pio := launch.IO{OutputLimit: limits.OutputBytes, LiveLimit: r.LiveLimit, Stdout: r.LiveStdout, Stderr: r.LiveStderr,
		DetachCleanup: r.DetachCleanup}
	if eg != nil {
		pio.Egress = &launch.Egress{Register: eg.Register, Refused: eg.Refused}
	}
	switch {
	case r.Stdin != nil:
		pio.Stdin = r.Stdin
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
