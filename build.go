//go:build linux

package confine

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
	"github.com/confine-sandbox/confine/internal/launch"
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
//	validate: spec + profile + host -> inputs (every check, whatever the
//	          input path; nothing is created)
//	provider.Select, asking inputs.guarantees of each backend (the ledger)
//	prepare:  inputs + backend -> run: one immutable plan per backend the
//	          run may use (the chosen one, and the core's when the chosen
//	          backend's namespaces may fail to set up), the private
//	          directory and pids cgroup they share
//	launch.Run executes one of them; describe turns the plan that ran
//	into the result's backend, layers and guarantees.

// inputs is a spec checked against its profile and this host: everything a
// plan needs that does not depend on the backend.
type inputs struct {
	h      host.Info
	prof   policy.Profile
	limits spec.Limits

	dir      string
	worktree string // canonical
	rw, ro   []string
	optional []string
	hidden   []string // credential files left out of --ro grants
	// control are confine's own control surfaces (control.go), which no
	// grant may cover.
	control []ctlpaths.Path
	// guarded are the paths inside the writable roots the persistence
	// guard keeps read-only (the work tree's .git); see gitGuard.
	guarded   []string
	guardRows []plan.GuardRow // the profile's refused rows besides git's (plan.Plan.GuardRows)
	repos     []string        // the git directories the persistence report watches (reportedRepos)
	watch     []persist.Watch // further paths it watches: the profile's [guard] rows (profileGuard)
	omitted   []string        // PATH components left out
	env       []string        // sanitised, PATH decided; HOME and TMPDIR come with the private dir
	prog      string
	argv      []string
	uid, gid  int  // -1: the launcher's own
	runAsRoot bool // the command runs as uid 0
	// allow is the compiled allowlist of a network = "allowlist" run
	// (nil: deny-all); egress its proxy, started once a backend is chosen.
	allow         *policy.CompiledAllowlist
	grants        []policy.EgressGrant // verified by RunCommand
	egress        *egressRun
	pidsOptional  bool
	wantPidsGroup bool // a uid-0 run the pids cgroup may bound
	callerEnv     envLookup
	warm          *Warm // the launcher's (nil: none)
}

// validate checks s against prof on h and resolves what every backend
// shares. It creates nothing.
func validate(s *spec.CommandSpec, prof policy.Profile, h host.Info, limits spec.Limits, callerEnv envLookup, control func(runUID int) []ctlpaths.Path) (*inputs, error) {
	in := &inputs{h: h, prof: prof, limits: limits, uid: -1, gid: -1, callerEnv: callerEnv}
	worktree, err := canonicalDir(s.Worktree)
	if err != nil {
		return nil, fmt.Errorf("%w: worktree: %v", spec.ErrInvalidSpec, err)
	}
	in.dir, in.worktree = worktree, worktree
	if s.Dir != "" {
		if in.dir, err = canonicalDir(s.Dir); err != nil {
			return nil, fmt.Errorf("%w: dir: %v", spec.ErrInvalidSpec, err)
		}
		if !spec.Within(in.dir, worktree) {
			return nil, fmt.Errorf("%w: dir %q resolves outside worktree %q", spec.ErrInvalidSpec, in.dir, worktree)
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
		if in.allow, err = a.Compile(); err != nil {
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
		in.uid, in.gid = int(st.Uid), int(st.Gid)
		in.runAsRoot = in.uid == 0
	}
	if control != nil {
		in.control = control(in.uid)
	}
	if err := in.roots(s, prof, worktree); err != nil {
		return nil, err
	}
	in.pidsOptional = slices.Contains(prof.Waives(), spec.GProcesses)
	in.wantPidsGroup = in.runAsRoot && limits.MaxProcs > 0 && h.PidsCgroupRoot != ""

	if err := in.environment(s, prof); err != nil {
		return nil, err
	}
	in.argv = append([]string{s.Program}, s.Args...)
	return in, nil
}

// roots checks and resolves the run's read-write roots (the worktree
// first) and read-only roots, with the same rules whatever asked for them.
func (in *inputs) roots(s *spec.CommandSpec, prof policy.Profile, worktree string) error {
	in.rw = []string{worktree}
	for _, r := range append(slices.Clone(prof.Writable), s.ReadWrite...) {
		c, err := canonicalDir(r)
		if err != nil {
			return fmt.Errorf("%w: read-write root: %v", spec.ErrInvalidSpec, err)
		}
		in.rw = append(in.rw, c)
	}
	waive := prof.Waives()
	if err := checkWritableRoots(in.rw, waive); err != nil {
		return err
	}
	if err := checkControl(in.rw, in.control); err != nil {
		return err
	}
	var err error
	if in.guarded, err = gitGuard(in.rw, waive); err != nil {
		return err
	}
	in.repos = reportedRepos(worktree, in.guarded, waive)
	gp, err := prof.GuardPolicy()
	if err != nil {
		return fmt.Errorf("%w: profile %s: %v", spec.ErrInvalidSpec, prof.Name, err)
	}
	kept, watch, err := profileGuard(in.rw, worktree, in.guarded, prof.Guard != nil, gp)
	if err != nil {
		return err
	}
	in.guarded, in.watch = append(in.guarded, kept...), watch
	if prof.Guard != nil {
		for _, e := range gp.Refused() {
			in.guardRows = append(in.guardRows, plan.GuardRow{Name: e.Name, Pattern: e.Pattern, Why: e.Why})
		}
	}
	in.ro = landlock.DefaultSystemReadExec()
	in.optional = slices.Clone(in.ro)
	for _, r := range append(slices.Clone(prof.ReadExec), s.ReadOnly...) {
		c, err := filepath.EvalSymlinks(r)
		if err != nil {
			return fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		var inControl []string
		for _, p := range in.control {
			if spec.Within(c, p.Path) {
				return fmt.Errorf("%w: %s: read-only root %s lies inside its %s %s", spec.ErrUnavailable, controlGuarantee, c, p.What, p.Path)
			}
			inControl = append(inControl, p.Path)
		}
		grants, excluded, err := credpath.SplitReadGrant(c, inControl...)
		if err != nil {
			return fmt.Errorf("%w: read-only root: %v", spec.ErrInvalidSpec, err)
		}
		in.ro = append(in.ro, grants...)
		in.hidden = append(in.hidden, excluded...)
	}
	in.optional = append(in.optional, prof.Devices...)
	return nil
}

// environment builds the command's environment and finds its program.
func (in *inputs) environment(s *spec.CommandSpec, prof policy.Profile) error {
	var err error
	in.env, in.omitted, in.prog, err = commandEnv(s, prof.Env.Waive, in.ro, in.rw, in.callerEnv.get("PATH"), in.dir)
	if err != nil {
		return in.outsideView(s.Program, err)
	}
	return nil
}

// outsideView turns a program the run cannot find or execute into a
// hinted refusal (spec.Hinted) when the program exists on the host
// outside every granted root (found as the caller would find it: by its
// path, or in the caller's PATH): the fix is a --ro of its directory. A
// program inside the roots failed for another reason and keeps err.
func (in *inputs) outsideView(prog string, err error) error {
	if !errors.Is(err, spec.ErrNotFound) && !errors.Is(err, spec.ErrNotExecutable) {
		return err
	}
	host := hostProgram(prog, in.dir, in.callerEnv.get("PATH"))
	if host == "" {
		return err
	}
	real, rerr := filepath.EvalSymlinks(host)
	if rerr != nil {
		return err
	}
	roots := append(slices.Clone(in.ro), in.rw...)
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

// maxInferred bounds the denials inferDenials adds to one result.
const maxInferred = 16

// inferDenials adds to res the refusals the kernel made on its own
// (Landlock's EACCES, the read-only mount tree's EROFS, a path missing
// from the sandbox's view) that the command's error messages name
// (refusalsIn), with the grant that allows each: --rw of the nearest
// existing directory for a write outside the writable roots, --ro of the
// directory for a path that exists on the host outside every granted
// root. A path inside the grants, a path that exists nowhere, and the
// credential files the run hides are left alone: no grant is the fix.
func (in *inputs) inferDenials(res *spec.CommandResult) {
	const seen = " (named in the command's error message; the kernel refused it)"
	text := string(res.Stderr.Head) + "\n" + string(res.Stderr.Tail)
	writable := func(p string) bool {
		return slices.ContainsFunc(in.rw, func(r string) bool { return spec.Within(p, r) })
	}
	readable := func(p string) bool {
		return writable(p) || slices.ContainsFunc(in.ro, func(r string) bool { return spec.Within(p, r) })
	}
	n := 0
	for _, r := range refusalsIn(text) {
		if n == maxInferred {
			return
		}
		if writable(r.path) || slices.ContainsFunc(in.hidden, func(h string) bool { return spec.Within(r.path, h) }) || credentialLike(r.path) {
			continue
		}
		st, err := os.Stat(r.path)
		exists := err == nil
		parent := filepath.Dir(r.path)
		pst, perr := os.Stat(parent)
		parentDir := perr == nil && pst.IsDir() && parent != "/"
		write := func(dir string) spec.Denial {
			return spec.Denial{Syscall: "write", Path: r.path, Errno: r.errno, Reason: "outside the writable roots" + seen, Hint: "--rw " + dir}
		}
		var d spec.Denial
		switch {
		case exists && !readable(r.path):
			// Outside the view, whatever the call: reading it needs --ro.
			dir := r.path
			if !st.IsDir() {
				dir = parent
			}
			d = spec.Denial{Syscall: "open", Path: r.path, Errno: r.errno, Reason: "exists on the host, outside the sandbox's read roots" + seen,
				Hint: "--ro " + dir}
		case r.errno == "EROFS" || r.errno == "EACCES":
			// A write (or a new file) in a read-only or ungranted place.
			dir := existingDir(parent)
			if dir == "" || dir == "/" {
				continue
			}
			d = write(dir)
		case r.errno == "ENOENT" && !exists && parentDir && !readable(parent):
			// A new file in a directory the sandbox does not show.
			d = write(parent)
		default:
			// Inside the grants, or missing on the host too.
			continue
		}
		res.Denials = append(res.Denials, d)
		n++
	}
}

// credentialLike reports whether p is, or lies in, one of the paths that
// hold credentials (credpath.Under: a home's .ssh, .netrc,
// ..., a cargo home's credentials) wherever it is: never a grant to
// suggest.
func credentialLike(p string) bool {
	return slices.ContainsFunc(credpath.Under(filepath.Dir(p)), func(c string) bool {
		return strings.Contains(p+"/", "/"+c+"/")
	})
}

// existingDir is dir or its nearest ancestor that exists on the host as a
// directory ("" for none).
func existingDir(dir string) string {
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
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

// guarantees resolves the ledger for backend p: every guarantee with the
// mechanism that enforces it there, or spec.ErrUnavailable naming each one
// nothing enforces and the profile does not waive.
func (in *inputs) guarantees(p provider.Provider) ([]spec.Guarantee, error) {
	f := provider.Facts(in.h, p, in.runAsRoot, in.limits.MaxProcs)
	f.Allowlist = in.allow != nil
	f.GitDir = len(in.guarded) > 0
	return ledger.Resolve(ledger.Decide(p.Ledger(), f), in.prof.Waives())
}

// planned is one backend's plan and the result fields it determines. It is
// not changed once built.
type planned struct {
	backend    provider.Provider
	plan       *plan.Plan
	guarantees []spec.Guarantee
	layers     []string
}

// describe writes the backend, layers and guarantees of the plan that ran
// into res.
func (p *planned) describe(res *spec.CommandResult) {
	res.Backend = p.backend.Name()
	res.Layers = slices.Clone(p.layers)
	res.Guarantees = slices.Clone(p.guarantees)
	switch {
	case p.plan.MemoryCgroup != "":
		res.MemoryBound = "memory-cgroup"
	case p.plan.MemoryWatch > 0:
		res.MemoryBound = "memory-watch"
	default:
		res.MemoryBound = "rlimit-data"
	}
}

// run is what prepare made for one RunCommand.
type run struct {
	primary planned
	// core is the plan the run falls back to when primary's namespaces
	// cannot be set up; nil when it may not (coreRefusal says why).
	core        *planned
	required    bool
	coreRefusal string
	tmp         *tmpdir.Dir
	cgroup      string
	// memCgroup is the run's memory cgroup, for the plans whose backend
	// uses one (created by the launch).
	memCgroup string
	// caches are the profile's warm caches, NAME=DIR (cache.go).
	caches []string
	// goProg serves the GOCACHE cache, reading the caller's through; nil
	// when there is none (cache.go).
	goProg *goCacheProg
}

// prepare creates the run's private directory and builds the plans:
// backend's, and, unless required forbids leaving it or the core cannot
// enforce the run's guarantees, the core's to fall back to.
func (in *inputs) prepare(backend provider.Provider, required bool) (*run, error) {
	td := stablePrivate(in.callerEnv, in.prof, in.dir, in.uid, in.rw)
	if td == nil {
		var err error
		if td, err = in.warm.privateDir(in.callerEnv.tempDir(), in.uid, in.gid); err != nil {
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
	}
	var err error
	r := &run{tmp: td}
	if in.wantPidsGroup {
		// Created by the launch if the run joins it.
		r.cgroup = filepath.Join(in.h.PidsCgroupRoot, "confine-"+randHex())
	}
	// Without its caches a run is only slower (cold), never less confined.
	if root, err := cacheRoot(in.callerEnv, in.prof, in.dir, in.uid); err == nil && len(in.prof.Caches) > 0 && outsideRoots(root, in.rw) {
		r.caches, _ = cacheDirsFrom(in.callerEnv, in.prof, in.dir, in.uid)
	}
	if own := getEnv(r.caches, "GOCACHE"); own != "" && !hasEnv(in.env, "GOCACHE") && !hasEnv(in.env, "GOCACHEPROG") {
		// Without it the run's first build in a work directory is cold.
		r.goProg, _ = startGoCacheProg(in.callerEnv, own, td.Scratch(), in.limits.FileSizeBytes)
	}
	if in.usesMemoryCgroup() {
		r.memCgroup = filepath.Join(in.h.MemoryCgroup.Parent, "confine-"+randHex())
	}
	if r.primary, err = in.build(backend, r); err != nil {
		r.cleanup()
		return nil, err
	}
	if r.primary.plan.Backend != plan.BackendNamespaces {
		return r, nil
	}
	r.required = required
	if required {
		return r, nil
	}
	core, _ := provider.Lookup(provider.Core)
	switch c, err := in.build(core, r); {
	case err != nil:
		r.coreRefusal = "the core cannot take over: " + strings.TrimPrefix(err.Error(), spec.ErrUnavailable.Error()+": ")
	default:
		r.core = &c
	}
	return r, nil
}

// build is the one step that turns inputs into a backend's plan.
func (in *inputs) build(backend provider.Provider, r *run) (planned, error) {
	gs, err := in.guarantees(backend)
	if err != nil {
		return planned{}, err
	}
	env := slices.Clone(in.env)
	if !hasEnv(env, "HOME") {
		env = append(env, "HOME="+r.tmp.Home)
	}
	if !hasEnv(env, "TMPDIR") {
		env = append(env, "TMPDIR="+r.tmp.Tmp)
	}
	rw := append(slices.Clone(in.rw), r.tmp.Grants()...)
	ro := slices.Clone(in.ro)
	for _, c := range r.caches {
		name, dir, _ := strings.Cut(c, "=")
		if own := profileValue(in.prof, name); !hasEnv(env, name) || own != "" && getEnv(env, name) == own {
			// The caller's own value wins (and is not granted here); the
			// profile's own (the caller's cache, read-only) is the
			// fallback the cache replaces.
			env = append(slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") }), c)
			rw = append(rw, dir)
			if name == "GOCACHE" && r.goProg != nil {
				env = append(env, r.goProg.env)
				ro = append(ro, r.goProg.exe)
			}
		}
	}
	var pidsMax int64
	if r.cgroup != "" {
		// The init's own threads are counted too.
		pidsMax = in.limits.MaxProcs + 16
	}
	p := &plan.Plan{
		Path:    in.prog,
		Argv:    slices.Clone(in.argv),
		Env:     env,
		Dir:     in.dir,
		Rlimits: rlimit.FromLimits(in.limits),
		UID:     in.uid,
		GID:     in.gid,
		Landlock: plan.Landlock{
			ReadExec:  ro,
			ReadWrite: rw,
			Devices:   slices.Clone(in.prof.Devices),
			Optional:  slices.Clone(in.optional),
			DenyTCP:   landlock.Has(in.h.LandlockABI, landlock.FeatTCP),
			Scope:     landlock.Has(in.h.LandlockABI, landlock.FeatScope),
		},
		Seccomp: plan.Seccomp{NotifyMetadata: true, NotifyConnect: true,
			NotifyTruncate: !landlock.Has(in.h.LandlockABI, landlock.FeatTruncate),
			NotifyRename:   !landlock.Has(in.h.LandlockABI, landlock.FeatRefer),
			NotifyFork:     in.countsForks(provider.Facts(in.h, backend, in.runAsRoot, in.limits.MaxProcs))},
		PidsCgroup:    r.cgroup,
		PidsMax:       pidsMax,
		PidsOptional:  in.pidsOptional,
		PrivateTmp:    r.tmp.Removable(),
		WritableRoots: slices.Clone(rw),
		Guarded:       slices.Clone(in.guarded),
		GuardRows:     slices.Clone(in.guardRows),
		WallTime:      in.limits.WallTime,
		KillGrace:     in.limits.KillGrace,
	}
	if in.egress != nil {
		p.Env = in.egress.env(p.Env)
		p.Seccomp.NotifyInet = true
		p.EgressProxy = in.egress.addr.String()
	} else {
		// Deny-all: an internet socket is refused all the same, by the
		// supervisor, which records it for the result's denials.
		p.Seccomp.ReportInet = true
	}
	if r.memCgroup != "" && provider.Facts(in.h, backend, in.runAsRoot, in.limits.MaxProcs).MemoryCgroup {
		// The cgroup bounds the tree; a per-process RLIMIT_DATA as well
		// would refuse runtimes whose private mappings (thread stacks,
		// arenas) are far larger than what they touch.
		p.MemoryCgroup, p.MemoryCgroupV2, p.MemoryMax = r.memCgroup, in.h.MemoryCgroup.V2, in.memoryMax()
		p.Rlimits.Data = unix.RLIM_INFINITY
	} else if in.limits.MemoryBytes > 0 {
		// No cgroup: the launcher watches the tree's memory, and each
		// process keeps RLIMIT_DATA, which refuses an allocation before
		// the watch would kill the whole run.
		p.MemoryWatch = in.limits.MemoryBytes
	}
	backend.Configure(p)
	if p.Backend == plan.BackendCore {
		// Without a PID namespace only the supervisor keeps calls that
		// name another process inside the run: signals too where
		// Landlock has no signal scope.
		p.Seccomp.NotifyProcTargets = true
		p.Seccomp.NotifySignals = !landlock.Has(in.h.LandlockABI, landlock.FeatScope)
	}
	if err := guardNotify(p); err != nil {
		return planned{}, err
	}
	return planned{backend: backend, plan: p, guarantees: gs, layers: layers(backend, p)}, nil
}

// fallback is what launch runs when the primary plan's namespaces cannot
// be set up.
func (r *run) fallback() launch.Fallback {
	if r.core == nil {
		return launch.Fallback{Required: r.required, Refusal: r.coreRefusal}
	}
	return launch.Fallback{Plan: r.core.plan}
}

// stopGoProg stops the run's GOCACHEPROG server, if any; once its tree
// is gone, nothing talks to it.
func (r *run) stopGoProg() {
	if r.goProg != nil {
		_ = r.goProg.server.Close()
		r.goProg = nil
	}
}

func (r *run) cleanup() {
	r.stopGoProg()
	r.tmp.Remove()
	if r.cgroup != "" {
		_ = host.RemoveCgroup(r.cgroup)
	}
	if r.memCgroup != "" {
		_ = host.RemoveCgroup(r.memCgroup)
	}
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
