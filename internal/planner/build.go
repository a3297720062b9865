//go:build linux

package planner

import (
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/persist"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/internal/rlimit"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// The pipeline from a spec to what launch executes:
//
//	Validate: spec + profile + host -> Inputs (every check, whatever the
//	          input path; nothing is created)
//	provider.Select, asking Inputs.Guarantees of each backend (the ledger)
//	linuxrun's prepare creates the Resources the plans name (the
//	          private directory, the cgroups' paths, the warm caches)
//	Build:    Inputs + backend + Resources -> Planned: one immutable plan
//	          per backend the run may use (the chosen one, and the core's
//	          when the chosen backend's namespaces may fail to set up)
//	launch.Run executes one of them; Describe turns the plan that ran
//	into the result's backend, layers and guarantees.

// Inputs is a spec checked against its profile and this host: everything a
// plan needs that does not depend on the backend.
type Inputs struct {
	Host    host.Info
	Profile policy.Profile
	Limits  spec.Limits

	Dir      string
	Worktree string // canonical
	RW, RO   []string
	optional []string
	Hidden   []string // credential files left out of --ro grants
	// control are confine's own control surfaces (ctlpaths), which no
	// grant may cover.
	control []ctlpaths.Path
	// Guarded are the paths inside the writable roots the persistence
	// guard keeps read-only (the work tree's .git); see GitGuard.
	Guarded   []string
	GuardRows []plan.GuardRow // the profile's refused rows besides git's (plan.Plan.GuardRows)
	Repos     []string        // the git directories the persistence report watches (ReportedRepos)
	Watch     []persist.Watch // further paths it watches: the profile's [guard] rows (ProfileGuard)
	Omitted   []string        // PATH components left out
	Env       []string        // sanitised, PATH decided; HOME and TMPDIR come with the private dir
	Prog      string
	argv      []string
	UID, GID  int  // -1: the launcher's own
	runAsRoot bool // the command runs as uid 0
	// Allow is the compiled allowlist of a network = "allowlist" run
	// (nil: deny-all).
	Allow         *policy.CompiledAllowlist
	pidsOptional  bool
	WantPidsGroup bool   // a uid-0 run the pids cgroup may bound
	callerPATH    string // the caller's PATH, not the run's
}

// Validate checks s against prof on h and resolves what every backend
// shares. It creates nothing.
func Validate(s *spec.CommandSpec, prof policy.Profile, h host.Info, limits spec.Limits, callerPATH string, control func(runUID int) []ctlpaths.Path) (*Inputs, error) {
	in := &Inputs{Host: h, Profile: prof, Limits: limits, UID: -1, GID: -1, callerPATH: callerPATH}
	worktree, err := CanonicalDir(s.Worktree)
	if err != nil {
		return nil, fmt.Errorf("%w: worktree: %v", spec.ErrInvalidSpec, err)
	}
	in.Dir, in.Worktree = worktree, worktree
	if s.Dir != "" {
		if in.Dir, err = CanonicalDir(s.Dir); err != nil {
			return nil, fmt.Errorf("%w: dir: %v", spec.ErrInvalidSpec, err)
		}
		if !spec.Within(in.Dir, worktree) {
			return nil, fmt.Errorf("%w: dir %q resolves outside worktree %q", spec.ErrInvalidSpec, in.Dir, worktree)
		}
	}
	// A spec may narrow an allowlist profile to deny-all; one that widens
	// a deny-all profile is refused by CheckRun.
	if prof.Network == spec.Allowlist && s.Network != spec.DenyAll {
		a := prof.Allowlist
		if a == nil {
			a = &policy.Allowlist{}
		}
		var err error
		if in.Allow, err = a.Compile(); err != nil {
			return nil, err
		}
	}
	in.runAsRoot = h.EUID == 0
	if h.EUID == 0 {
		// Run as whoever owns the worktree, so it stays writable with every
		// capability gone; a root-owned tree keeps uid 0.
		var st unix.Stat_t
		if err := unix.Stat(worktree, &st); err != nil {
			return nil, fmt.Errorf("%w: worktree: %v", spec.ErrInvalidSpec, err)
		}
		in.UID, in.GID = int(st.Uid), int(st.Gid)
		in.runAsRoot = in.UID == 0
	}
	if control != nil {
		in.control = control(in.UID)
	}
	if err := in.roots(s, prof, worktree); err != nil {
		return nil, err
	}
	in.pidsOptional = slices.Contains(prof.Waives(), spec.GProcesses)
	in.WantPidsGroup = in.runAsRoot && limits.MaxProcs > 0 && h.PidsCgroupRoot != ""

	in.argv = append([]string{s.Program}, s.Args...)
	return in, nil
}

// roots resolves the run's read-write roots (the worktree first) and
// read-only roots, and checks them and the environment with CheckRun,
// the rules every OS's launch applies; then the paths the persistence
// report watches and the profile's [guard] changes (Linux only).
func (in *Inputs) roots(s *spec.CommandSpec, prof policy.Profile, worktree string) error {
	in.RW = []string{worktree}
	for _, r := range append(slices.Clone(prof.Writable), s.ReadWrite...) {
		c, err := CanonicalDir(r)
		if err != nil {
			return fmt.Errorf("%w: read-write root: %v", spec.ErrInvalidSpec, err)
		}
		in.RW = append(in.RW, c)
	}
	var asked []string
	for _, r := range append(slices.Clone(prof.ReadExec), s.ReadOnly...) {
		c, err := filepath.EvalSymlinks(r)
		if err != nil {
			return fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		asked = append(asked, c)
	}
	system := landlock.DefaultSystemReadExec()
	c, err := CheckRun(s, prof, Roots{Dir: in.Dir, Writable: in.RW, System: system, Asked: asked, Split: credpath.SplitReadGrant}, in.control, in.callerPATH)
	if err != nil {
		return err
	}
	in.Guarded, in.RO, in.Hidden = c.Guarded, c.ReadOnly, c.Hidden
	in.Env, in.Omitted, in.Prog = c.Env, c.Omitted, c.Prog
	in.optional = append(slices.Clone(system), prof.Devices...)
	waive := prof.Waives()
	in.Repos = ReportedRepos(worktree, in.Guarded, waive)
	gp, err := prof.GuardPolicy()
	if err != nil {
		return fmt.Errorf("%w: profile %s: %v", spec.ErrInvalidSpec, prof.Name, err)
	}
	kept, watch, err := ProfileGuard(in.RW, worktree, in.Guarded, prof.Guard != nil, gp)
	if err != nil {
		return err
	}
	in.Guarded, in.Watch = append(in.Guarded, kept...), watch
	if prof.Guard != nil {
		for _, e := range gp.Refused() {
			in.GuardRows = append(in.GuardRows, plan.GuardRow{Name: e.Name, Pattern: e.Pattern, Why: e.Why})
		}
	}
	return nil
}

// OutsideView is outsideView with the run's roots: a program the run
// cannot find or execute that exists on the host outside them is a
// hinted refusal.
func (in *Inputs) OutsideView(prog string, err error) error {
	return outsideView(prog, in.Dir, in.callerPATH, append(slices.Clone(in.RO), in.RW...), err)
}

// guarantees resolves the ledger for backend p: every guarantee with the
// mechanism that enforces it there, or spec.ErrUnavailable naming each one
// nothing enforces and the profile does not waive.
func (in *Inputs) Guarantees(p provider.Provider) ([]spec.Guarantee, error) {
	f := provider.Facts(in.Host, p, in.runAsRoot, in.Limits.MaxProcs)
	f.Allowlist = in.Allow != nil
	f.GitDir = len(in.Guarded) > 0
	return ledger.Resolve(ledger.Decide(p.Ledger(), f), in.Profile.Waives())
}

// Planned is one backend's plan and the result fields it determines. It is
// not changed once built.
type Planned struct {
	Backend    provider.Provider
	Plan       *plan.Plan
	Guarantees []spec.Guarantee
	Layers     []string
}

// Describe writes the backend, layers and guarantees of the plan that ran
// into res.
func (p *Planned) Describe(res *spec.CommandResult) {
	res.Backend = p.Backend.Name()
	res.Layers = slices.Clone(p.Layers)
	res.Guarantees = slices.Clone(p.Guarantees)
	switch {
	case p.Plan.MemoryCgroup != "":
		res.MemoryBound = "memory-cgroup"
	case p.Plan.MemoryWatch > 0:
		res.MemoryBound = "memory-watch"
	default:
		res.MemoryBound = "rlimit-data"
	}
}

// Resources are what the launch made for a run before its plans are
// built: the plans name them, and every plan of the run shares them.
type Resources struct {
	Tmp *tmpdir.Dir
	// PidsCgroup and MemoryCgroup are the cgroups the launch creates if
	// the run joins them ("": none).
	PidsCgroup, MemoryCgroup string
	// Caches are the profile's warm caches, NAME=DIR.
	Caches []string
	// GoProgEnv is the GOCACHEPROG entry of the server that serves the
	// GOCACHE cache, and GoProgExe the executable it runs ("": none).
	GoProgEnv, GoProgExe string
	// EgressEnv names the egress proxy at EgressProxy in an environment
	// (nil: no proxy, the deny-all run).
	EgressEnv   func(env []string) []string
	EgressProxy string
}

// Build is the one step that turns Inputs into a backend's plan.
func (in *Inputs) Build(backend provider.Provider, r Resources) (Planned, error) {
	gs, err := in.Guarantees(backend)
	if err != nil {
		return Planned{}, err
	}
	env := slices.Clone(in.Env)
	if !HasEnv(env, "HOME") {
		env = append(env, "HOME="+r.Tmp.Home)
	}
	if !HasEnv(env, "TMPDIR") {
		env = append(env, "TMPDIR="+r.Tmp.Tmp)
	}
	rw := append(slices.Clone(in.RW), r.Tmp.Grants()...)
	ro := slices.Clone(in.RO)
	for _, c := range r.Caches {
		name, dir, _ := strings.Cut(c, "=")
		if own := GetEnv(in.Profile.Env.Set, name); !HasEnv(env, name) || own != "" && GetEnv(env, name) == own {
			// The caller's own value wins (and is not granted here); the
			// profile's own (the caller's cache, read-only) is the
			// fallback the cache replaces.
			env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }), c)
			rw = append(rw, dir)
			if name == "GOCACHE" && r.GoProgEnv != "" {
				env = append(env, r.GoProgEnv)
				ro = append(ro, r.GoProgExe)
			}
		}
	}
	var pidsMax int64
	if r.PidsCgroup != "" {
		// The init's own threads are counted too.
		pidsMax = in.Limits.MaxProcs + 16
	}
	p := &plan.Plan{
		Path:    in.Prog,
		Argv:    slices.Clone(in.argv),
		Env:     env,
		Dir:     in.Dir,
		Rlimits: rlimit.FromLimits(in.Limits),
		UID:     in.UID,
		GID:     in.GID,
		Landlock: plan.Landlock{
			ReadExec:  ro,
			ReadWrite: rw,
			Devices:   slices.Clone(in.Profile.Devices),
			Optional:  slices.Clone(in.optional),
			DenyTCP:   landlock.Has(in.Host.LandlockABI, landlock.FeatTCP),
			Scope:     landlock.Has(in.Host.LandlockABI, landlock.FeatScope),
		},
		Seccomp: plan.Seccomp{Arch: plan.Arch(runtime.GOARCH), NotifyMetadata: true, NotifyConnect: true,
			NotifyTruncate: !landlock.Has(in.Host.LandlockABI, landlock.FeatTruncate),
			NotifyRename:   !landlock.Has(in.Host.LandlockABI, landlock.FeatRefer),
			NotifyFork:     in.countsForks(provider.Facts(in.Host, backend, in.runAsRoot, in.Limits.MaxProcs))},
		PidsCgroup:    r.PidsCgroup,
		PidsMax:       pidsMax,
		PidsOptional:  in.pidsOptional,
		PrivateTmp:    r.Tmp.Removable(),
		WritableRoots: slices.Clone(rw),
		Guarded:       slices.Clone(in.Guarded),
		GuardRows:     slices.Clone(in.GuardRows),
		WallTime:      in.Limits.WallTime,
		KillGrace:     in.Limits.KillGrace,
	}
	if r.EgressEnv != nil {
		p.Env = r.EgressEnv(p.Env)
		p.Seccomp.NotifyInet = true
		p.EgressProxy = r.EgressProxy
	} else {
		// Deny-all: an internet socket is refused all the same, by the
		// supervisor, which records it for the result's denials.
		p.Seccomp.ReportInet = true
	}
	if r.MemoryCgroup != "" && provider.Facts(in.Host, backend, in.runAsRoot, in.Limits.MaxProcs).MemoryCgroup {
		// The cgroup bounds the tree; a per-process RLIMIT_DATA as well
		// would refuse runtimes whose private mappings (thread stacks,
		// arenas) are far larger than what they touch.
		p.MemoryCgroup, p.MemoryCgroupV2, p.MemoryMax = r.MemoryCgroup, in.Host.MemoryCgroup.V2, in.memoryMax()
		p.Rlimits.Data = unix.RLIM_INFINITY
	} else if in.Limits.MemoryBytes > 0 {
		// No cgroup: the launcher watches the tree's memory, and each
		// process keeps RLIMIT_DATA, which refuses an allocation before
		// the watch would kill the whole run.
		p.MemoryWatch = in.Limits.MemoryBytes
	}
	p.Backend, p.Namespaces = backend.Section(*p)
	if err := p.CheckBackend(); err != nil {
		// What follows reads the backend from p.Backend alone.
		return Planned{}, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	if !p.Backend.Namespaced() {
		// Without a PID namespace only the supervisor keeps calls that
		// name another process inside the run: signals too where
		// Landlock has no signal scope.
		p.Seccomp.NotifyProcTargets = true
		p.Seccomp.NotifySignals = !landlock.Has(in.Host.LandlockABI, landlock.FeatScope)
	}
	if err := guardNotify(p); err != nil {
		return Planned{}, err
	}
	return Planned{Backend: backend, Plan: p, Guarantees: gs, Layers: layers(backend, p)}, nil
}

// layers names the confinement layers a provider and its plan switch on.
func layers(prov provider.Provider, p *plan.Plan) []string {
	ls := prov.Layers()
	if p.Seccomp.Listener() {
		ls = append(ls, "seccomp-notify")
	}
	switch {
	case p.Backend.Namespaced() && p.Namespaces.PidMax > 0:
		ls = append(ls, "pid-max")
	case p.PidsCgroup != "":
		ls = append(ls, "pids-cgroup")
	case p.Seccomp.NotifyFork:
		ls = append(ls, "fork-count")
	}
	if p.MemoryCgroup != "" {
		ls = append(ls, "memory-cgroup")
	} else if p.MemoryWatch > 0 {
		ls = append(ls, "memory-watch")
	}
	if p.UID >= 0 {
		ls = append(ls, "caps-dropped")
	}
	return ls
}

// rowNames names guard rows for a refusal.
func rowNames(rows []plan.GuardRow) string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Name + " (" + r.Pattern + ")"
	}
	return strings.Join(out, ", ")
}

// guardNotify sends the persistence guard's calls to the supervisor where
// the plan guards a path or refuses rows by name; bubblewrap, whose
// supervisor cannot refuse a name, refuses a profile's rows besides git's.
func guardNotify(p *plan.Plan) error {
	if len(p.GuardRows) > 0 && !p.Backend.RefusesNames() {
		// No silent downgrade: what matches a refused row during the
		// run would be written.
		return fmt.Errorf("%w: %w: %s: the profile's [guard] refuses rows besides git's (%s): bubblewrap's supervisor cannot refuse a new entry matching one by name (it does not resolve the command's paths in its tree); use the default backend or --backend core", spec.ErrUnavailable, ErrGuard, spec.GGitPersistence, rowNames(p.GuardRows))
	}
	if (len(p.Guarded) > 0 || len(p.GuardRows) > 0) && p.Backend.RefusesNames() {
		// The persistence guard's refusal of a new .git (notify.Create).
		// With namespaces the supervisor resolves in the command's own
		// tree (on Landlock ABI 1 its emulation of renames across
		// directories does too); bubblewrap's supervisor has no such
		// resolution.
		p.Seccomp.NotifyCreate = true
		// Without namespaces Landlock grants the work tree entry by
		// entry: entries made during the run are written and removed
		// through the supervisor (notify's guardtree.go).
		p.Seccomp.NotifyGuardTree = !p.Backend.Namespaced() && len(p.Guarded) > 0
	}
	return nil
}
