//go:build linux

package planner

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
//	the root package's prepare creates the Resources the plans name (the
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
	if s.Network == spec.Allowlist && prof.Network != spec.Allowlist {
		return nil, fmt.Errorf("%w: the spec asks for network %q but profile %q is %q; a spec cannot widen its profile's network", spec.ErrInvalidSpec, s.Network, prof.Name, spec.DenyAll)
	}
	// A spec may narrow an allowlist profile to deny-all.
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

	if err := in.environment(s, prof); err != nil {
		return nil, err
	}
	in.argv = append([]string{s.Program}, s.Args...)
	return in, nil
}

// roots checks and resolves the run's read-write roots (the worktree
// first) and read-only roots, with the same rules whatever asked for them.
func (in *Inputs) roots(s *spec.CommandSpec, prof policy.Profile, worktree string) error {
	in.RW = []string{worktree}
	for _, r := range append(slices.Clone(prof.Writable), s.ReadWrite...) {
		c, err := CanonicalDir(r)
		if err != nil {
			return fmt.Errorf("%w: read-write root: %v", spec.ErrInvalidSpec, err)
		}
		in.RW = append(in.RW, c)
	}
	waive := prof.Waives()
	if err := CheckWritableRoots(in.RW, waive); err != nil {
		return err
	}
	if err := CheckControl(in.RW, in.control); err != nil {
		return err
	}
	var err error
	if in.Guarded, err = GitGuard(in.RW, waive); err != nil {
		return err
	}
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
	in.RO = landlock.DefaultSystemReadExec()
	in.optional = slices.Clone(in.RO)
	for _, r := range append(slices.Clone(prof.ReadExec), s.ReadOnly...) {
		c, err := filepath.EvalSymlinks(r)
		if err != nil {
			return fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		var inControl []string
		for _, p := range in.control {
			if spec.Within(c, p.Path) {
				return fmt.Errorf("%w: %s: read-only root %s lies inside its %s %s", spec.ErrUnavailable, ControlGuarantee, c, p.What, p.Path)
			}
			inControl = append(inControl, p.Path)
		}
		grants, excluded, err := credpath.SplitReadGrant(c, inControl...)
		if err != nil {
			return fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		in.RO = append(in.RO, grants...)
		in.Hidden = append(in.Hidden, excluded...)
	}
	in.optional = append(in.optional, prof.Devices...)
	return nil
}

// environment builds the command's environment and finds its program.
func (in *Inputs) environment(s *spec.CommandSpec, prof policy.Profile) error {
	var err error
	in.Env, in.Omitted, in.Prog, err = CommandEnv(s, prof.Env.Waive, in.RO, in.RW, in.callerPATH, in.Dir)
	if err != nil {
		return in.OutsideView(s.Program, err)
	}
	return nil
}

// outsideView turns a program the run cannot find or execute into a
// hinted refusal (spec.Hinted) when the program exists on the host
// outside every granted root (found as the caller would find it: by its
// path, or in the caller's PATH): the fix is a --ro of its directory. A
// program inside the roots failed for another reason and keeps err.
func (in *Inputs) OutsideView(prog string, err error) error {
	if !errors.Is(err, spec.ErrNotFound) && !errors.Is(err, spec.ErrNotExecutable) {
		return err
	}
	host := hostProgram(prog, in.Dir, in.callerPATH)
	if host == "" {
		return err
	}
	real, rerr := filepath.EvalSymlinks(host)
	if rerr != nil {
		return err
	}
	roots := append(slices.Clone(in.RO), in.RW...)
	var grants []string
	for _, d := range []string{filepath.Dir(host), filepath.Dir(real)} {
		if !slices.ContainsFunc(roots, func(r string) bool { return spec.Within(d, r) }) && !slices.Contains(grants, "--ro "+d) {
			grants = append(grants, "--ro "+d)
		}
	}
	if slices.ContainsFunc(roots, func(r string) bool { return spec.Within(real, r) }) || len(grants) == 0 {
		return err
	}
	errno := "ENOENT"
	if errors.Is(err, spec.ErrNotExecutable) {
		errno = "EACCES"
	}
	return &spec.Hinted{Err: err, Denial: spec.Denial{Syscall: "execve", Path: host, Errno: errno,
		Reason: host + " exists on the host, outside the sandbox's read roots", Hint: strings.Join(grants, " ")}}
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
		Seccomp: plan.Seccomp{NotifyMetadata: true, NotifyConnect: true,
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
	backend.Configure(p)
	if p.Backend == plan.BackendCore {
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
	case p.Namespaces != nil && p.Namespaces.PidMax > 0:
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

// hostProgram is the executable regular file prog names on the host: a
// path (relative to dir), or the first match in path (the caller's PATH,
// not the run's); "" when there is none.
func hostProgram(prog, dir, path string) string {
	var cands []string
	switch {
	case strings.Contains(prog, "/") && filepath.IsAbs(prog):
		cands = []string{prog}
	case strings.Contains(prog, "/"):
		cands = []string{filepath.Join(dir, prog)}
	default:
		for _, d := range filepath.SplitList(path) {
			if filepath.IsAbs(d) {
				cands = append(cands, filepath.Join(d, prog))
			}
		}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Clean(c)
		}
	}
	return ""
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
	if len(p.GuardRows) > 0 && p.Backend == plan.BackendBwrap {
		// No silent downgrade: what matches a refused row during the
		// run would be written.
		return fmt.Errorf("%w: %w: %s: the profile's [guard] refuses rows besides git's (%s): bubblewrap's supervisor cannot refuse a new entry matching one by name (it does not resolve the command's paths in its tree); use the default backend or --backend core", spec.ErrUnavailable, ErrGuard, spec.GGitPersistence, rowNames(p.GuardRows))
	}
	if (len(p.Guarded) > 0 || len(p.GuardRows) > 0) && (p.Backend == plan.BackendCore || p.Backend == plan.BackendNamespaces) {
		// The persistence guard's refusal of a new .git (notify.Create).
		// With namespaces the supervisor resolves in the command's own
		// tree (on Landlock ABI 1 its emulation of renames across
		// directories does too); bubblewrap's supervisor has no such
		// resolution.
		p.Seccomp.NotifyCreate = true
		// Without namespaces Landlock grants the work tree entry by
		// entry: entries made during the run are written and removed
		// through the supervisor (notify's guardtree.go).
		p.Seccomp.NotifyGuardTree = p.Namespaces == nil && len(p.Guarded) > 0
	}
	return nil
}
