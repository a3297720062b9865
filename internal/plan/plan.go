// Package plan is the launch plan: everything the launcher, the run's init and the
// child need to start one confined command, decided in the launcher before
// anything is spawned. It travels over a pipe, so it is plain data.
package plan

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// Rlimits are applied in the child before exec. Zero means unlimited for
// none of them: every field is always set by the launcher.
type Rlimits struct {
	CPUSeconds uint64 `json:"cpu"`
	// Data is RLIMIT_DATA: each process's private writable memory
	// (reservations made with PROT_NONE do not count, unlike
	// RLIMIT_AS), or RLIM_INFINITY where a memory cgroup bounds the run.
	Data   uint64 `json:"data"`
	NProc  uint64 `json:"nproc"`
	FSize  uint64 `json:"fsize"`
	NoFile uint64 `json:"nofile"`
}

// Namespaces asks for the landlock+namespaces provider: the run's init is started
// in new user, PID, mount, network, IPC and UTS namespaces, stays there as
// the PID namespace's init, and the command's child confines itself exactly as
// under the core.
type Namespaces struct {
	// UIDs and GIDs are mapped to themselves in the user namespace.
	UIDs []int `json:"uids"`
	GIDs []int `json:"gids"`
	// Setgroups keeps setgroups(2) usable in the user namespace (only a
	// privileged supervisor may write a multi-id map with it allowed).
	Setgroups bool `json:"setgroups,omitempty"`
	// Private are directories that get a fresh, per-run tmpfs the command
	// may write (/dev/shm) in the mount namespace's root, which otherwise
	// holds only the plan's roots; a directory that lies within a root is
	// left as the root has it.
	Private []string `json:"private,omitempty"`
	// TmpfsBytes caps each of those tmpfs mounts.
	TmpfsBytes int64 `json:"tmpfs_bytes"`
	// Hostname is set in the UTS namespace.
	Hostname string `json:"hostname,omitempty"`
	// PidMax, when set, is written to the PID namespace's own
	// kernel.pid_max (Linux 6.14+) and bounds its processes instead of the
	// plan's pids cgroup, which the launcher then does not join (joining
	// one costs an RCU grace period; the cgroup stays for a fall-back to
	// the core).
	PidMax int `json:"pid_max,omitempty"`
	// Bwrap, when set, is the bubblewrap binary that creates the
	// namespaces and the mount tree (the bubblewrap provider): the
	// supervisor starts it instead of the launcher cloning the init, which runs
	// inside as the PID namespace's init without setting anything up,
	// and the IDs above are unused.
	// Such a run never falls back to the core.
	Bwrap string `json:"bwrap,omitempty"`
}

// Backend names the backend a plan is for. The planner sets it from the
// backend's provider (provider.Provider.Section) as it builds the plan;
// the launcher, the supervisors and the layers ask it, never the plan's
// shape.
type Backend string

// The backends, named as their providers are.
const (
	BackendCore       Backend = "landlock+seccomp"
	BackendNamespaces Backend = "landlock+namespaces"
	BackendBwrap      Backend = "bubblewrap"
)

// backendTraits are what each backend's launch gives the command, which
// the planner decides the plan's sections from (and CheckBackend checks).
var backendTraits = map[Backend]struct {
	// namespaced: the command runs in PID and mount namespaces of its
	// own. The PID namespace resolves pids within the run and has its
	// own pid_max; the mount layout binds the guarded paths read-only.
	namespaced bool
	// refusesNames: the backend's supervisor can refuse a new directory
	// entry by name, resolving the command's paths in its tree
	// (notify.Create); bubblewrap's supervisor cannot.
	refusesNames bool
}{
	BackendCore:       {namespaced: false, refusesNames: true},
	BackendNamespaces: {namespaced: true, refusesNames: true},
	BackendBwrap:      {namespaced: true, refusesNames: false},
}

// Namespaced says the backend runs the command in PID and mount
// namespaces of its own (false for an unknown backend).
func (b Backend) Namespaced() bool { return backendTraits[b].namespaced }

// RefusesNames says the backend's supervisor can refuse a new directory
// entry by name (false for an unknown backend).
func (b Backend) RefusesNames() bool { return backendTraits[b].refusesNames }

// CheckBackend refuses a plan whose Backend is unknown or disagrees with
// its Namespaces section: the core's plan has none, landlock+namespaces'
// one without Bwrap, bubblewrap's one with it.
func (p *Plan) CheckBackend() error {
	var ok bool
	switch p.Backend {
	case BackendCore:
		ok = p.Namespaces == nil
	case BackendNamespaces:
		ok = p.Namespaces != nil && p.Namespaces.Bwrap == ""
	case BackendBwrap:
		ok = p.Namespaces != nil && p.Namespaces.Bwrap != ""
	default:
		return fmt.Errorf("plan for unknown backend %q", p.Backend)
	}
	if !ok {
		return fmt.Errorf("plan for backend %s has a namespaces section that backend does not use", p.Backend)
	}
	if p.Backend.Namespaced() && (p.Seccomp.NotifyProcTargets || p.Seccomp.NotifySignals) {
		return fmt.Errorf("plan for backend %s sends the calls that name another process to the supervisor: only the core's may (a PID namespace resolves pids within the run)", p.Backend)
	}
	return nil
}

// LandlockGuarded are the guarded paths Landlock keeps read-only
// (landlock.Prepare's guarded): Guarded for the core, none for the
// backends with namespaces, whose mount layout binds them read-only (and
// whose work tree's top level stays open).
func (p *Plan) LandlockGuarded() []string {
	if p.Backend != BackendCore {
		// Not p.Backend.Namespaced(): an unknown backend's plan guards
		// nothing by Landlock either.
		return nil
	}
	return p.Guarded
}

// Plan is one run's launch plan.
type Plan struct {
	// Backend is the backend the plan is for.
	Backend Backend `json:"backend"`

	Path string   `json:"path"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`

	Rlimits Rlimits `json:"rlimits"`
	// UID/GID the command runs as; -1 keeps the launcher's.
	UID int `json:"uid"`
	GID int `json:"gid"`
	// PidsCgroup, when set, is a cgroup directory (pids controller, at
	// most PidsMax tasks) the command is joined to before it runs. It is
	// created only when a run joins it: a namespaced run bounded by its
	// PID namespace's pid_max does not. PidsOptional (the guarantee is
	// waived) runs without it when it cannot be created.
	PidsCgroup   string `json:"pids_cgroup,omitempty"`
	PidsMax      int64  `json:"pids_max,omitempty"`
	PidsOptional bool   `json:"pids_optional,omitempty"`
	// MemoryCgroup, when set, is the run's memory cgroup (a child of the
	// launcher's own, MemoryCgroupV2 for a v2 hierarchy), bounded at
	// MemoryMax bytes for the whole tree. The launcher creates it, its
	// init starts inside it, and the launcher reads the peak and the OOM
	// kills and removes it once the tree is gone. Rlimits.Data is then
	// not the bound.
	MemoryCgroup   string `json:"memory_cgroup,omitempty"`
	MemoryCgroupV2 bool   `json:"memory_cgroup_v2,omitempty"`
	MemoryMax      int64  `json:"memory_max,omitempty"`
	// MemoryWatch, when positive, bounds the tree's summed memory where
	// there is no memory cgroup: the supervision samples it
	// (proctree.WatchMemory) and kills the whole run once it passes
	// MemoryWatch bytes (Report.MemoryOver).
	MemoryWatch int64 `json:"memory_watch,omitempty"`
	// PrivateTmp is the run's private directory; the supervisor removes
	// it, and the cgroup, once the tree is gone (also when the launcher
	// died and cannot).
	PrivateTmp string `json:"private_tmp,omitempty"`

	Landlock Landlock `json:"landlock"`
	Seccomp  Seccomp  `json:"seccomp"`
	// Namespaces, when set, runs the command in new namespaces.
	Namespaces *Namespaces `json:"namespaces,omitempty"`

	// WritableRoots and SocketAllow feed the metadata/connect supervisor.
	WritableRoots []string `json:"writable_roots"`
	SocketAllow   []string `json:"socket_allow,omitempty"`
	// Guarded are paths inside the writable roots that stay read-only:
	// the persistence guard's .git. Without namespaces Landlock grants
	// around them (LandlockGuarded); with them the mount layout binds
	// them read-only (nsinit.PlanLayout). The supervisor never writes
	// them either.
	Guarded []string `json:"guarded,omitempty"`
	// GuardRows are the rows besides git's a profile's [guard] refuses
	// (internal/guardset): a new entry the command makes that matches one,
	// relative to the writable root holding it, is refused by the
	// supervisor (Seccomp.NotifyCreate), as Guarded keeps what matched at
	// launch.
	GuardRows []GuardRow `json:"guard_rows,omitempty"`
	// EgressProxy is the launcher's egress proxy ("127.0.0.1:PORT"), the
	// only internet address the supervisor connects the command to
	// (network = "allowlist"; Seccomp.NotifyInet).
	EgressProxy string `json:"egress_proxy,omitempty"`

	WallTime  time.Duration `json:"wall_time"`
	KillGrace time.Duration `json:"kill_grace"`
}

const maxPlan = 16 << 20

// Write sends p as a length-prefixed JSON message.
func Write(w io.Writer, p *Plan) error {
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	var hdr [4]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(append(hdr[:], b...)); err != nil {
		return fmt.Errorf("send plan: %w", err)
	}
	return nil
}

// Read receives a plan written by Write.
func Read(r io.Reader) (*Plan, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("read plan header: %w", err)
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > maxPlan {
		return nil, fmt.Errorf("plan too large (%d bytes)", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("read plan: %w", err)
	}
	p := new(Plan)
	if err := json.Unmarshal(b, p); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	if err := p.CheckBackend(); err != nil {
		return nil, fmt.Errorf("decode plan: %w", err)
	}
	return p, nil
}

// GuardRow is one refused row of the protected set (guardset.Entry's
// name, pattern and why).
type GuardRow struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
	Why     string `json:"why,omitempty"`
}

// Report is what the supervisor sends back when the run is over.
type Report struct {
	// StartErr is set when the command never ran; StartCode is then the
	// exit status the CLI should use (125, 126 or 127).
	StartErr  string `json:"start_err,omitempty"`
	StartCode int    `json:"start_code,omitempty"`

	ExitCode  int  `json:"exit_code"`
	Signal    int  `json:"signal"`
	TimedOut  bool `json:"timed_out"`
	Cancelled bool `json:"cancelled"`
	Killed    bool `json:"killed"`
	Survivors int  `json:"survivors"`

	UserCPU  time.Duration `json:"user_cpu"`
	SysCPU   time.Duration `json:"sys_cpu"`
	MaxRSSKB int64         `json:"max_rss_kb"`
	// MemoryPeak is the tree's peak memory use in bytes, as its memory
	// cgroup recorded it (0: no memory cgroup, or a kernel that does not
	// record it). OOMKilled says the kernel killed a process of the run
	// for reaching the cgroup's bound.
	MemoryPeak int64 `json:"memory_peak,omitempty"`
	OOMKilled  bool  `json:"oom_killed,omitempty"`
	// MemoryOver says the memory watch (Plan.MemoryWatch) saw the tree
	// above its bound and killed it; MemoryPeak is then its highest
	// sample.
	MemoryOver bool `json:"memory_over,omitempty"`

	// Denials are the latest refusals by the metadata/connect supervisor.
	Denials []spec.Denial `json:"denials,omitempty"`

	// Namespaces says the command ran in the plan's namespaces. When the
	// plan asked for them and they could not be set up, NamespacesSkipped
	// says why and the command ran under the core provider.
	Namespaces        bool   `json:"namespaces,omitempty"`
	NamespacesSkipped string `json:"namespaces_skipped,omitempty"`
}

// InitStatus is what the run's init, as the init of its PID namespace,
// reports on its exit pipe when the command is over: its own exit status
// cannot carry a signal (the kernel ignores signals an init sends itself).
type InitStatus struct {
	ExitCode  int `json:"exit_code"`
	Signal    int `json:"signal,omitempty"`
	Survivors int `json:"survivors,omitempty"`
}

// CodeNamespaces is the init's status code (never an exit status) for
// "the namespaces could not be set up": the supervisor then falls back to
// the core provider unless the plan requires them.
const CodeNamespaces = 90
