package policy

import (
	"fmt"
	"strings"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/spec"
)

// Guarantee names. A profile waives one by naming it.
const (
	GNoNetwork      = "no-network"
	GCleanEnv       = "no-inherited-env"
	GCredentials    = "no-credential-files"
	GNoInheritedFDs = "no-inherited-fds"
	GFSWrite        = "fs-write-confined"
	GFSRead         = "fs-read-confined"
	GFSMetadata     = "fs-metadata-confined"
	GUnixSockets    = "no-foreign-unix-sockets"
	GSignals        = "no-foreign-signals"
	GProcInspect    = "no-process-inspection"
	GTerminal       = "no-terminal-injection"
	GKernelSurface  = "reduced-kernel-surface"
	GResources      = "bounded-resources"
	GProcesses      = "bounded-processes"
	GTreeKill       = "tree-kill"
	GNoPrivilege    = "no-privilege"
)

// AllGuarantees lists every guarantee in report order.
var AllGuarantees = []string{
	GNoNetwork, GCleanEnv, GCredentials, GNoInheritedFDs, GFSWrite, GFSRead, GFSMetadata,
	GUnixSockets, GSignals, GProcInspect, GTerminal, GKernelSurface,
	GResources, GProcesses, GTreeKill, GNoPrivilege,
}

// Assessment says, for one guarantee on one host, what enforces it or what
// is missing.
type Assessment struct {
	Name      string `json:"name"`
	Mechanism string `json:"mechanism,omitempty"`
	Missing   string `json:"missing,omitempty"`
	Waived    bool   `json:"waived,omitempty"`
}

// Assess maps host facts to a mechanism per guarantee. runAsRoot says the
// command would run as uid 0 (which RLIMIT_NPROC does not bound), and
// pidsCgroup whether a pids cgroup can bound it instead.
func Assess(h host.Info, runAsRoot, pidsCgroup bool) []Assessment {
	ll := h.LandlockABI > 0
	sc := h.Seccomp
	llm := fmt.Sprintf("landlock abi %d", h.LandlockABI)
	out := make([]Assessment, 0, len(AllGuarantees))
	need := func(name string, ok bool, mech, missing string) {
		a := Assessment{Name: name}
		if ok {
			a.Mechanism = mech
		} else {
			a.Missing = missing
		}
		out = append(out, a)
	}
	noLL := "Landlock (CONFIG_SECURITY_LANDLOCK, enabled in the lsm= list): " + h.LandlockErr
	noSC := "seccomp filter with user notification (CONFIG_SECCOMP_FILTER, kernel >= 5.5): " + h.SeccompErr

	netMech := "seccomp: socket() limited to AF_UNIX, io_uring denied, foreign arch/x32 killed"
	if h.LandlockABI >= 4 {
		netMech += "; " + llm + " denies TCP bind/connect"
	}
	need(GNoNetwork, sc, netMech, noSC)
	need(GCleanEnv, true, "launcher: environment built from scratch", "")
	need(GCredentials, ll, llm+": credential files inside read-only roots are left out of the grant; a writable root holding one is refused", noLL)
	need(GNoInheritedFDs, true, "the command marks every descriptor >= 3 close-on-exec (close_range) right before execve; stdio are fresh pipes", "")
	need(GFSWrite, ll, llm+": writes only in the workdir, the private temp dir and granted roots", noLL)
	need(GFSRead, ll, llm+": reads only in declared roots; /proc limited to non-process entries", noLL)
	need(GFSMetadata, ll && sc, "seccomp user notification: chmod/chown/utimes/xattr resolved and performed by the launcher (the supervisor under bubblewrap) only inside writable roots", noSC)
	unixOK := sc && h.LandlockABI >= 6
	unixMissing := "Landlock ABI >= 6 (abstract unix socket scoping, kernel 6.12)"
	if !sc {
		unixMissing = noSC
	}
	need(GUnixSockets, unixOK, "seccomp user notification on connect (pathname sockets) + "+llm+" abstract-socket scope; unconnected datagram sockets refused", unixMissing)
	need(GSignals, h.LandlockABI >= 6, llm+" signal scope", "Landlock ABI >= 6 (signal scoping, kernel 6.12)")
	need(GProcInspect, ll && sc, "seccomp denies ptrace/process_vm_*/pidfd_getfd; "+llm+" keeps other processes' /proc entries unreadable", noLL)
	need(GTerminal, sc, "setsid (no controlling terminal) + seccomp denies TIOCSTI/TIOCLINUX", noSC)
	need(GKernelSurface, sc, "seccomp denies bpf, perf_event_open, userfaultfd, keyctl, mount, namespaces, module/kexec and similar", noSC)
	need(GResources, true, "rlimits: CPU, address space, file size, open files, core=0; wall timeout; bounded capture", "")
	switch {
	case !runAsRoot:
		need(GProcesses, true, "RLIMIT_NPROC (per uid)", "")
	case pidsCgroup:
		need(GProcesses, true, "pids cgroup (uid 0 is exempt from RLIMIT_NPROC)", "")
	default:
		need(GProcesses, false, "", "a writable pids cgroup: the command runs as uid 0, which RLIMIT_NPROC does not bound")
	}
	need(GTreeKill, true, "the run's init is a child subreaper: every descendant is killed and reaped, also on launcher death (the init then becomes the reaper)", "")
	need(GNoPrivilege, true, "no_new_privs; all capabilities dropped from the five sets; securebits locked when root", "")
	return out
}

// Resolve applies a profile's waivers to an assessment and returns the
// per-run guarantee list, or spec.ErrUnavailable naming every guarantee that
// cannot be enforced and is not waived.
func Resolve(as []Assessment, waive []string) ([]spec.Guarantee, error) {
	waived := make(map[string]bool, len(waive))
	for _, w := range waive {
		waived[w] = true
	}
	gs := make([]spec.Guarantee, 0, len(as))
	var missing []string
	for _, a := range as {
		switch {
		case waived[a.Name]:
			gs = append(gs, spec.Guarantee{Name: a.Name, Waived: true})
		case a.Missing != "":
			missing = append(missing, fmt.Sprintf("%s needs %s", a.Name, a.Missing))
		default:
			gs = append(gs, spec.Guarantee{Name: a.Name, Mechanism: a.Mechanism})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s (a profile may waive a guarantee by name)", spec.ErrUnavailable, strings.Join(missing, "; "))
	}
	return gs, nil
}

// KnownGuarantee reports whether name is a guarantee a profile may waive.
func KnownGuarantee(name string) bool {
	for _, g := range AllGuarantees {
		if g == name {
			return true
		}
	}
	return false
}
