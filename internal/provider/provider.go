//go:build linux

// Package provider is the seam between the policy and the mechanisms that
// confine a command: a registry of backends in the seeds' Linux order, an
// availability check that says why a backend cannot run here, and the
// selection of one by the profile's tier, its require_namespaces and an
// explicit --backend. No provider, no execution: a run with none
// acceptable is refused with every reason.
//
// Linux order: landlock+namespaces (the core plus user, PID, mount,
// network, IPC and UTS namespaces, where unprivileged user namespaces
// work), landlock+seccomp (the core: Landlock, seccomp with user
// notification, rlimits, a subreaping init; it works in stock
// Docker and Kubernetes), bubblewrap (the core inside bwrap's namespaces;
// only when asked for by name), firecracker (tier 3; no microVM backend
// exists), and a container CLI (never selected automatically).
package provider

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Provider names.
const (
	Namespaces  = "landlock+namespaces"
	Core        = "landlock+seccomp"
	Bubblewrap  = "bubblewrap"
	Firecracker = "firecracker"
	Container   = "container"
)

// Provider is one confinement backend.
type Provider interface {
	// Name is the backend's name in results, the event log and --backend.
	Name() string
	// Tier is the highest tier the backend can serve.
	Tier() policy.Tier
	// Available says whether the backend can run commands on this host,
	// and why not.
	Available(h host.Info) (ok bool, reason string)
	// Automatic says the backend may be selected without being asked for
	// by name.
	Automatic() bool
	// Namespaces says the backend runs the command in namespaces of its
	// own (what a profile's require_namespaces asks for).
	Namespaces() bool
	// Layers are the confinement layers the backend always switches on;
	// a run adds those its plan asks for (seccomp-notify, pids-cgroup,
	// caps-dropped).
	Layers() []string
	// Section is what the backend puts in a launch plan: the backend's
	// value and the plan's namespaces section (nil: none), decided from
	// the plan built so far (its uid, gid and rlimits). The planner sets
	// both while it builds the plan; nothing changes a plan once built.
	Section(p plan.Plan) (plan.Backend, *plan.Namespaces)
	// Ledger names the guarantee ledger's layers the backend switches on:
	// what its guarantees are decided from. A built backend's are its
	// launch's (launch.Backend.Ledger), listed once there.
	Ledger() []ledger.Layer
}

// ledgerOf is what backend b contributes to the ledger, as its launch
// says (nil: a backend without one).
func ledgerOf(b plan.Backend) []ledger.Layer {
	impl, ok := launch.For(b)
	if !ok {
		return nil
	}
	return impl.Ledger()
}

// registry is the Linux order.
var registry = []Provider{namespaces{}, core{}, bubblewrap{}, firecracker, container}

// Registry returns the backends in the Linux order (a copy).
func Registry() []Provider { return slices.Clone(registry) }

// Lookup returns the provider a --backend value names: its name or one of
// the short forms namespaces/ns, core, bwrap, microvm, docker/podman.
func Lookup(name string) (Provider, bool) {
	switch strings.ToLower(name) {
	case "namespaces", "ns":
		name = Namespaces
	case "core", "landlock":
		name = Core
	case "bwrap":
		name = Bubblewrap
	case "microvm":
		name = Firecracker
	case "docker", "podman":
		name = Container
	}
	for _, p := range registry {
		if p.Name() == name {
			return p, true
		}
	}
	return nil, false
}

// Request is what a run asks of the selection.
type Request struct {
	Tier              policy.Tier
	RequireNamespaces bool
	// Backend, when set, is the only backend acceptable (a Lookup name).
	Backend string
	// Enforce, when set, says whether a backend enforces every guarantee
	// the run needs (nil) or what it cannot (an error naming each
	// guarantee and what it would need). A backend that cannot is
	// skipped with that reason.
	Enforce func(Provider) error
}

// Selection is the outcome: the provider and why each other one was
// skipped, in registry order.
type Selection struct {
	Provider Provider
	Skipped  []spec.SkippedBackend
}

// Select picks the first provider of the registry that serves the
// request's tier, is available, is asked for by name or selected
// automatically, and runs namespaces when the profile requires them. With
// none it returns spec.ErrUnavailable (spec.ErrInvalidSpec for an unknown
// --backend) listing every reason.
func Select(h host.Info, r Request) (Selection, error) {
	var want Provider
	if r.Backend != "" && r.Backend != "auto" {
		var ok bool
		if want, ok = Lookup(r.Backend); !ok {
			var names []string
			for _, p := range registry {
				names = append(names, p.Name())
			}
			return Selection{}, fmt.Errorf("%w: unknown backend %q (known: auto, %s)", spec.ErrInvalidSpec, r.Backend, strings.Join(names, ", "))
		}
	}
	var sel Selection
	for _, p := range registry {
		reason := ""
		ok, why := p.Available(h)
		switch {
		case p.Tier() < r.Tier:
			reason = fmt.Sprintf("serves tier %d at most; tier %d needs a microVM backend", p.Tier(), r.Tier)
		case !ok:
			reason = why
		case sel.Provider != nil:
			reason = sel.Provider.Name() + " comes first"
		case want != nil && p.Name() != want.Name():
			reason = "not requested (--backend " + want.Name() + ")"
		case r.RequireNamespaces && !p.Namespaces():
			reason = "the profile requires namespaces"
		case want == nil && !p.Automatic():
			reason = "never selected automatically"
		default:
			// Decided last and once: the ledger resolution runs only
			// for a backend that could otherwise be taken.
			if r.Enforce == nil {
				sel.Provider = p
				continue
			}
			err := r.Enforce(p)
			if err == nil {
				sel.Provider = p
				continue
			}
			reason = strings.TrimSuffix(strings.TrimPrefix(err.Error(), spec.ErrUnavailable.Error()+": "), ledger.WaiveHint)
		}
		sel.Skipped = append(sel.Skipped, spec.SkippedBackend{Name: p.Name(), Reason: reason})
	}
	if sel.Provider != nil {
		return sel, nil
	}
	var reasons []string
	for _, s := range sel.Skipped {
		if want != nil && s.Name == want.Name() {
			return sel, fmt.Errorf("%w: backend %s cannot run commands here: %s", spec.ErrUnavailable, s.Name, s.Reason)
		}
		reasons = append(reasons, s.Name+": "+s.Reason)
	}
	what := "no backend can run this command here"
	switch {
	case r.Tier >= policy.TierHostile:
		what = policy.CheckTier(r.Tier).Error()
		what = strings.TrimPrefix(what, spec.ErrUnavailable.Error()+": ")
	case r.RequireNamespaces:
		what = "the profile requires namespaces (require_namespaces), and no backend here provides them"
	}
	return sel, fmt.Errorf("%w: %s (%s)", spec.ErrUnavailable, what, strings.Join(reasons, "; "))
}

// coreAvailable is what the core needs: Landlock and seccomp with user
// notification. Guarantees the host's ABI cannot enforce are refused (or
// waived) by the ledger, not here.
func coreAvailable(h host.Info) (bool, string) {
	switch {
	case h.LandlockABI < 1:
		return false, "no Landlock: " + h.LandlockErr
	case !h.Seccomp:
		return false, "no seccomp filter with user notification: " + h.SeccompErr
	}
	return true, ""
}

var coreLayers = []string{"landlock", "seccomp", "rlimits", "subreaper"}

// core is Landlock, seccomp (with user notification), rlimits and the
// subreaping init: every guarantee, no namespace.
type core struct{}

func (core) Name() string                                       { return Core }
func (core) Tier() policy.Tier                                  { return policy.TierSandboxed }
func (core) Available(h host.Info) (bool, string)               { return coreAvailable(h) }
func (core) Automatic() bool                                    { return true }
func (core) Namespaces() bool                                   { return false }
func (core) Layers() []string                                   { return append([]string(nil), coreLayers...) }
func (core) Section(plan.Plan) (plan.Backend, *plan.Namespaces) { return plan.BackendCore, nil }
func (core) Ledger() []ledger.Layer                             { return ledgerOf(plan.BackendCore) }

// unbuilt is a backend of the seeds' order that confine does not have:
// listed so that results say why it was not used, never available.
type unbuilt struct {
	name        string
	tier        policy.Tier
	automatic   bool
	unavailable string
}

func (u unbuilt) Name() string                                     { return u.name }
func (u unbuilt) Tier() policy.Tier                                { return u.tier }
func (u unbuilt) Available(host.Info) (bool, string)               { return false, u.unavailable }
func (u unbuilt) Automatic() bool                                  { return u.automatic }
func (unbuilt) Namespaces() bool                                   { return true }
func (unbuilt) Layers() []string                                   { return nil }
func (unbuilt) Section(plan.Plan) (plan.Backend, *plan.Namespaces) { return "", nil }
func (unbuilt) Ledger() []ledger.Layer                             { return nil }

var (
	firecracker = unbuilt{name: Firecracker, tier: policy.TierHostile, automatic: true, unavailable: "no microVM backend is implemented"}
	container   = unbuilt{name: Container, tier: policy.TierSandboxed,
		unavailable: "not implemented (and a container CLI is never selected automatically)"}
)

// namespaces is the core inside new user, PID, mount, network, IPC and UTS
// namespaces.
type namespaces struct{}

var nsLayers = []string{"user-ns", "pid-ns", "mount-ns", "net-ns", "ipc-ns", "uts-ns"}

func (namespaces) Name() string      { return Namespaces }
func (namespaces) Tier() policy.Tier { return policy.TierSandboxed }
func (namespaces) Automatic() bool   { return true }
func (namespaces) Namespaces() bool  { return true }

func (namespaces) Available(h host.Info) (bool, string) {
	if ok, why := coreAvailable(h); !ok {
		return false, why
	}
	if !h.UserNS {
		why := h.UserNSErr
		if why == "" {
			why = "unknown"
		}
		return false, "user namespaces unavailable: " + why
	}
	return true, ""
}

func (namespaces) Layers() []string {
	return append(append([]string(nil), coreLayers...), nsLayers...)
}

func (namespaces) Section(p plan.Plan) (plan.Backend, *plan.Namespaces) {
	uids, gids, setgroups := nsinit.Mappings(os.Geteuid(), os.Getegid(), p.UID, p.GID)
	size := int64(nsinit.MaxTmpfsBytes)
	if p.Rlimits.FSize > 0 && p.Rlimits.FSize < uint64(size) {
		size = int64(p.Rlimits.FSize)
	}
	ns := &plan.Namespaces{
		UIDs:       uids,
		GIDs:       gids,
		Setgroups:  setgroups,
		Private:    nsinit.DefaultPrivate(),
		TmpfsBytes: size,
		Hostname:   nsinit.Hostname,
	}
	if p.UID == 0 {
		// uid 0 is exempt from RLIMIT_NPROC: the namespace's own pid_max
		// bounds the run where the kernel has it (0 otherwise).
		ns.PidMax = nsinit.PidMax(int(p.Rlimits.NProc))
	}
	return plan.BackendNamespaces, ns
}

func (namespaces) Ledger() []ledger.Layer { return ledgerOf(plan.BackendNamespaces) }

// bubblewrap is the core inside namespaces that bwrap creates: bwrap
// builds the user, PID, mount, network, IPC and UTS namespaces and a mount
// tree of only the run's roots; inside, confine's init (internal/bwrap/inside)
// is the PID namespace's init and its child confines itself before exec.
// Never selected automatically (landlock+namespaces gives the same
// without an external program); a run that asks for it and cannot have
// it is refused, never moved to another backend.
type bubblewrap struct{}

var bwrapLayers = []string{"bwrap", "user-ns", "pid-ns", "mount-ns", "net-ns", "ipc-ns", "uts-ns"}

func (bubblewrap) Name() string      { return Bubblewrap }
func (bubblewrap) Tier() policy.Tier { return policy.TierSandboxed }
func (bubblewrap) Automatic() bool   { return false }
func (bubblewrap) Namespaces() bool  { return true }

// Available is cheap unless host.ProbeBwrap ran: then it says whether
// bwrap really created its namespaces.
func (bubblewrap) Available(h host.Info) (bool, string) {
	if ok, why := coreAvailable(h); !ok {
		return false, why
	}
	switch {
	case h.Bwrap == "":
		return false, "bwrap is not installed (not found on PATH)"
	case h.BwrapErr != "":
		return false, "bwrap cannot create its namespaces here: " + h.BwrapErr
	case !h.BwrapChecked && !h.UserNS && !setuid(h.Bwrap):
		why := h.UserNSErr
		if why == "" {
			why = "unknown"
		}
		return false, "user namespaces unavailable (bwrap is not setuid): " + why
	}
	return true, ""
}

func setuid(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode()&os.ModeSetuid != 0
}

func (bubblewrap) Layers() []string {
	return append(append([]string(nil), coreLayers...), bwrapLayers...)
}

func (bubblewrap) Section(p plan.Plan) (plan.Backend, *plan.Namespaces) {
	size := int64(nsinit.MaxTmpfsBytes)
	if p.Rlimits.FSize > 0 && p.Rlimits.FSize < uint64(size) {
		size = int64(p.Rlimits.FSize)
	}
	return plan.BackendBwrap, &plan.Namespaces{
		Private:    nsinit.DefaultPrivate(),
		TmpfsBytes: size,
		Hostname:   nsinit.Hostname,
		Bwrap:      host.Probe().Bwrap,
	}
}

func (bubblewrap) Ledger() []ledger.Layer { return ledgerOf(plan.BackendBwrap) }

// Facts are what the ledger decides p's guarantees from on host h, for a
// command that runs as uid 0 (rootCommand) with at most maxProcs
// processes.
func Facts(h host.Info, p Provider, rootCommand bool, maxProcs int64) ledger.Facts {
	f := ledger.Facts{
		LandlockABI: h.LandlockABI,
		Seccomp:     h.Seccomp,
		RootCommand: rootCommand,
		PidsCgroup:  rootCommand && maxProcs > 0 && h.PidsCgroupRoot != "",
		// bubblewrap's supervisor does not make one (yet).
		MemoryCgroup: h.MemoryCgroup.Parent != "" && !slices.Contains(p.Ledger(), ledger.Bwrap),
	}
	if rootCommand && slices.Contains(p.Ledger(), ledger.Namespaces) {
		f.PidMax = nsinit.PidMax(int(maxProcs)) > 0
	}
	return f
}
