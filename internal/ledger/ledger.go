// Package ledger is the one table of confine's guarantees. For every
// guarantee it holds what each layer contributes (the core, the
// namespaces, bubblewrap's namespaces), the kernel features and host
// conditions each contribution needs, and the escape vectors that attack
// the guarantee. Decide resolves the table for one backend on one host:
// every guarantee gets the mechanisms that hold there, or the features it
// is missing. Nothing else in confine writes guarantee text.
package ledger

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/spec"
)

// Layer is a group of mechanisms a backend switches on.
type Layer string

// Layers. Every backend has the core; landlock+namespaces adds Namespaces,
// bubblewrap adds Bwrap.
const (
	Core       Layer = "core"
	Namespaces Layer = "namespaces"
	Bwrap      Layer = "bubblewrap"
	// Seatbelt is macOS's backend on its own: none of the Linux layers
	// exist there.
	Seatbelt Layer = "seatbelt"
)

// Facts are what a decision depends on: the host's kernel features and the
// run's circumstances.
type Facts struct {
	// LandlockABI is the Landlock ABI in force (0: none).
	LandlockABI int
	// Seccomp says seccomp filters with user notification work.
	Seccomp bool
	// RootCommand says the command runs as uid 0, which RLIMIT_NPROC does
	// not bound.
	RootCommand bool
	// PidsCgroup says a per-run pids cgroup can be created.
	PidsCgroup bool
	// PidMax says a PID namespace can be given its own pid_max (Linux
	// 6.14+) for this run.
	PidMax bool
	// SandboxExec says macOS's /usr/bin/sandbox-exec is there.
	SandboxExec bool
	// Allowlist says the run's network policy is "allowlist" (the
	// egress proxy), not deny-all.
	Allowlist bool
	// MemoryCgroup says the run gets a memory cgroup of its own, which
	// bounds the whole tree.
	MemoryCgroup bool
	// GitDir says the run's work tree has a .git the persistence guard
	// keeps read-only (it is a git work tree, and the guard is not
	// waived).
	GitDir bool
}

// Who restricts a mechanism to commands running as some uids.
type Who int

// Values of Who.
const (
	AnyUID  Who = iota
	NonRoot     // the command does not run as uid 0
	Root        // the command runs as uid 0
)

// Mechanism is one layer's contribution to a guarantee.
type Mechanism struct {
	Layer Layer
	// Sufficient says the mechanism enforces the guarantee on its own;
	// otherwise it is defence in depth, reported only beside a
	// sufficient one.
	Sufficient bool
	// Feature, when set, is the Landlock feature the mechanism needs
	// (landlock.Feature names); MinABI follows from it.
	Feature string
	// Seccomp says the mechanism needs seccomp (with user notification).
	Seccomp bool
	Who     Who
	// PidsCgroup and PidMax: the mechanism needs that bound.
	PidsCgroup, PidMax bool
	// UnlessPidMax: the mechanism is not used where the PID namespace's
	// pid_max bounds the run (the run then never joins the pids cgroup).
	UnlessPidMax bool
	// UnlessPidsCgroup: the mechanism is not used where a pids cgroup
	// bounds the run.
	UnlessPidsCgroup bool
	// MemoryCgroup: the mechanism needs the run's memory cgroup;
	// UnlessMemoryCgroup: it is used only where there is none.
	MemoryCgroup, UnlessMemoryCgroup bool
	// Below, when set, names a Landlock feature whose absence switches
	// the mechanism on: the launcher uses it only on ABIs without the
	// feature, so it is claimed only there.
	Below string
	// Network, when set, is the network policy ("deny-all" or
	// "allowlist") the mechanism serves; it is not used under the other.
	Network spec.NetworkPolicy
	// NotWith, when set, is a layer whose backend cannot use the
	// mechanism (its supervisor lacks it).
	NotWith Layer
	// Alone says only the core on its own uses the mechanism: a backend
	// with namespaces does the same job by its mount layout instead.
	Alone bool
	// GitDir: the mechanism serves a work tree with a .git to guard;
	// NoGitDir: one without.
	GitDir, NoGitDir bool
	// Text says what enforces the guarantee. "{landlock}" stands for
	// "landlock abi N" with the ABI in force, "{foreign}" for the
	// foreign system call ABIs the filter kills on this architecture
	// (foreignABIs).
	Text string
}

// Guarantee is one row of the ledger.
type Guarantee struct {
	Name string
	// Promise is what the command cannot do, in one line.
	Promise    string
	Mechanisms []Mechanism
	// Vectors name the escape suite's rows (escape TestEscape) that
	// attack the guarantee; a trailing "*" matches a prefix.
	Vectors []string
}

// Entries returns a copy of the ledger, in report order.
func Entries() []Guarantee {
	out := make([]Guarantee, len(table))
	for i, g := range table {
		g.Mechanisms = slices.Clone(g.Mechanisms)
		g.Vectors = slices.Clone(g.Vectors)
		out[i] = g
	}
	return out
}

// holds reports whether m works under f, and if not, what it lacks.
func (m Mechanism) holds(f Facts) (bool, string) {
	var lack []string
	if m.Seccomp && !f.Seccomp {
		lack = append(lack, "seccomp filters with user notification (CONFIG_SECCOMP_FILTER, Linux 5.5+)")
	}
	if m.Feature != "" || m.Layer == Core {
		// Every core mechanism runs under Landlock's domain.
		need := 1
		what := "Landlock (CONFIG_SECURITY_LANDLOCK, enabled in the lsm= list)"
		if m.Feature != "" {
			ft, _ := landlock.FeatureByName(m.Feature)
			need, what = ft.ABI, ft.Need()
		}
		if f.LandlockABI < need {
			lack = append(lack, what)
		}
	}
	switch m.Who {
	case NonRoot:
		if f.RootCommand {
			lack = append(lack, "a command that does not run as uid 0")
		}
	case Root:
		if !f.RootCommand {
			lack = append(lack, "a command running as uid 0")
		}
	}
	if m.Layer == Seatbelt && !f.SandboxExec {
		lack = append(lack, "/usr/bin/sandbox-exec (macOS)")
	}
	if m.PidsCgroup && !f.PidsCgroup {
		lack = append(lack, "a writable pids cgroup")
	}
	if m.PidMax && !f.PidMax {
		lack = append(lack, "a PID namespace with its own pid_max (Linux 6.14+)")
	}
	if m.UnlessPidMax && f.PidMax {
		lack = append(lack, "no pid_max of the run's PID namespace (which bounds the run instead)")
	}
	if m.UnlessPidsCgroup && f.PidsCgroup {
		lack = append(lack, "no writable pids cgroup (which bounds the run instead)")
	}
	switch {
	case m.Network == spec.Allowlist && !f.Allowlist:
		lack = append(lack, "network = \"allowlist\"")
	case m.Network == spec.DenyAll && f.Allowlist:
		lack = append(lack, "network = \"deny-all\"")
	}
	if m.MemoryCgroup && !f.MemoryCgroup {
		lack = append(lack, "a memory cgroup the launcher may create below its own (root, or a delegated hierarchy; not under bubblewrap)")
	}
	if m.UnlessMemoryCgroup && f.MemoryCgroup {
		lack = append(lack, "no memory cgroup (which bounds the run instead)")
	}
	if m.GitDir && !f.GitDir {
		lack = append(lack, "a .git in the work tree")
	}
	if m.NoGitDir && f.GitDir {
		lack = append(lack, "no .git in the work tree")
	}
	if m.Below != "" && landlock.Has(f.LandlockABI, m.Below) {
		ft, _ := landlock.FeatureByName(m.Below)
		lack = append(lack, fmt.Sprintf("a Landlock ABI below %d (newer ones use %s instead)", ft.ABI, ft.What))
	}
	return len(lack) == 0, strings.Join(lack, " and ")
}

func (m Mechanism) text(f Facts) string {
	t := strings.ReplaceAll(m.Text, "{foreign}", foreignText(runtime.GOARCH))
	return strings.ReplaceAll(t, "{landlock}", fmt.Sprintf("landlock abi %d", f.LandlockABI))
}

// foreignABIs names, per GOARCH, the foreign system call ABIs its kernel
// offers a process, all of which the seccomp filter kills: its first
// instructions kill every AUDIT_ARCH but the native one (the 32-bit compat
// ABI) and, on amd64, the x32 bit. A mechanism's "{foreign}" says the
// running architecture's; internal/seccomp's tests hold its filters to
// this table.
var foreignABIs = []struct {
	GOARCH string
	ABIs   []string
}{
	{"amd64", []string{"i386", "x32"}},
	{"arm64", []string{"AArch32"}},
}

// ForeignABIs returns foreignABIs as GOARCH -> ABI names.
func ForeignABIs() map[string][]string {
	out := map[string][]string{}
	for _, a := range foreignABIs {
		out[a.GOARCH] = slices.Clone(a.ABIs)
	}
	return out
}

// foreignText is "{foreign}" on goarch.
func foreignText(goarch string) string {
	for _, a := range foreignABIs {
		if a.GOARCH == goarch {
			return "other ABIs' calls killed (" + strings.Join(a.ABIs, ", ") + ")"
		}
	}
	return "other ABIs' calls killed"
}

// Decision is one guarantee resolved for one backend on one host.
type Decision struct {
	Name string `json:"name"`
	// Mechanism names what enforces the guarantee: the sufficient
	// mechanisms that hold, then ("+ ...") the defence in depth.
	Mechanism string `json:"mechanism,omitempty"`
	// Missing says what would be needed when no sufficient mechanism
	// holds.
	Missing string `json:"missing,omitempty"`
	Waived  bool   `json:"waived,omitempty"`
}

// Decide resolves every guarantee for a backend made of layers, under f.
// Decisions come back in report order; waivers are applied by Resolve.
//
// The decisions are a pure function of layers and f (the table is fixed):
// they are computed once per pair in a process, so that a server's runs
// do not format the same mechanisms' text again (0.15 to 0.2 ms of CPU
// per run, docs/performance-launch.md). Each caller gets its own copy.
func Decide(layers []Layer, f Facts) []Decision {
	k := decideKey{layers: layerKey(layers), f: f}
	if ds, ok := decided.Load(k); ok {
		return slices.Clone(ds.([]Decision))
	}
	out := make([]Decision, 0, len(table))
	for _, g := range table {
		out = append(out, decide(g, layers, f))
	}
	decided.Store(k, slices.Clone(out))
	return out
}

// decided holds Decide's answers by decideKey (a handful of entries: one
// per backend and set of facts a process sees).
var decided sync.Map

type decideKey struct {
	layers string
	f      Facts
}

// layerKey is layers as one comparable string (a layer's name holds no
// NUL).
func layerKey(layers []Layer) string {
	var b strings.Builder
	for _, l := range layers {
		b.WriteString(string(l))
		b.WriteByte(0)
	}
	return b.String()
}

func decide(g Guarantee, layers []Layer, f Facts) Decision {
	d := Decision{Name: g.Name}
	suff, extra, missing := selectFor(g, layers, f)
	if len(suff) == 0 {
		d.Missing = strings.Join(missing, ", or ")
		return d
	}
	texts := func(ms []Mechanism) []string {
		out := make([]string, len(ms))
		for i, m := range ms {
			out[i] = m.text(f)
		}
		return out
	}
	d.Mechanism = strings.Join(texts(suff), "; ")
	for _, e := range texts(extra) {
		d.Mechanism += "; + " + e
	}
	return d
}

// selectFor splits g's mechanisms on a backend of layers under f: the
// sufficient ones that hold, the defence in depth that holds, and what
// each sufficient mechanism that does not hold would need.
func selectFor(g Guarantee, layers []Layer, f Facts) (suff, extra []Mechanism, missing []string) {
	for _, m := range g.Mechanisms {
		if m.Alone && len(layers) > 1 {
			continue
		}
		if m.NotWith != "" && slices.Contains(layers, m.NotWith) && m.Sufficient && m.applies(f) {
			missing = append(missing, "a backend other than "+m.NotWith.Backend()+" ("+m.text(f)+")")
			continue
		}
		if !slices.Contains(layers, m.Layer) {
			if m.Sufficient && m.applies(f) {
				missing = append(missing, "the "+m.Layer.Backend()+" backend ("+m.text(f)+")")
			}
			continue
		}
		ok, lack := m.holds(f)
		switch {
		case ok && m.Sufficient:
			suff = append(suff, m)
		case ok:
			extra = append(extra, m)
		case m.Sufficient && m.applies(f):
			missing = append(missing, lack)
		}
	}
	slices.Sort(missing)
	return suff, extra, slices.Compact(missing)
}

// applies says whether m serves the run's network policy at all; a
// mechanism for the other policy is never named as missing.
func (m Mechanism) applies(f Facts) bool {
	return m.Network == "" || (m.Network == spec.Allowlist) == f.Allowlist
}

// Backend names the backend whose layer l is: the one a refusal sends
// the reader to for a mechanism of l.
func (l Layer) Backend() string {
	switch l {
	case Namespaces:
		return "landlock+namespaces"
	case Bwrap:
		return "bubblewrap"
	case Seatbelt:
		return "seatbelt"
	}
	return "landlock+seccomp"
}

// Resolve applies a profile's waivers and returns the run's guarantees, or
// spec.ErrUnavailable naming every guarantee that no mechanism enforces and
// the profile does not waive, with what it would need.
func Resolve(ds []Decision, waive []string) ([]spec.Guarantee, error) {
	gs := make([]spec.Guarantee, 0, len(ds))
	var missing []string
	for _, d := range ds {
		switch {
		case slices.Contains(waive, d.Name):
			gs = append(gs, spec.Guarantee{Name: d.Name, Waived: true})
		case d.Missing != "":
			missing = append(missing, fmt.Sprintf("%s needs %s", d.Name, d.Missing))
		default:
			gs = append(gs, spec.Guarantee{Name: d.Name, Mechanism: d.Mechanism})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %s%s", spec.ErrUnavailable, strings.Join(missing, "; "), WaiveHint)
	}
	return gs, nil
}

// WaiveHint ends every refusal Resolve returns.
const WaiveHint = " (a profile may waive a guarantee by name)"

// Names returns the ledger's guarantee names in report order.
func Names() []string {
	out := make([]string, len(table))
	for i, g := range table {
		out[i] = g.Name
	}
	return out
}

// mechanism constructors keep the table readable.
func core(text string) Mechanism { return Mechanism{Layer: Core, Sufficient: true, Text: text} }
func coreSC(text string) Mechanism {
	return Mechanism{Layer: Core, Sufficient: true, Seccomp: true, Text: text}
}
func ns(text string) Mechanism   { return Mechanism{Layer: Namespaces, Sufficient: true, Text: text} }
func bw(text string) Mechanism   { return Mechanism{Layer: Bwrap, Sufficient: true, Text: text} }
func sb(text string) Mechanism   { return Mechanism{Layer: Seatbelt, Sufficient: true, Text: text} }
func plus(m Mechanism) Mechanism { m.Sufficient = false; return m }
func feat(m Mechanism, f string) Mechanism {
	m.Feature = f
	return m
}
func who(m Mechanism, w Who) Mechanism { m.Who = w; return m }
func network(m Mechanism, n spec.NetworkPolicy) Mechanism {
	m.Network = n
	return m
}

// table is the ledger. Order is report order (spec.Guarantees).
var table = []Guarantee{
	{
		Name:    spec.GNoNetwork,
		Promise: "no socket of any network family, TCP or UDP (so no DNS), by any system call ABI or io_uring",
		Mechanisms: []Mechanism{
			network(coreSC("seccomp: socket() limited to AF_UNIX, io_uring denied, {foreign}"), spec.DenyAll),
			{Layer: Core, Sufficient: true, Seccomp: true, Network: spec.Allowlist, NotWith: Bwrap,
				Text: "network allowlist: seccomp-notify makes internet TCP sockets unconnected placeholders and connects them only to the launcher's egress proxy (which checks the allowlist before any lookup); UDP, raw, ICMP, MPTCP and io_uring denied, {foreign}"},
			plus(feat(core("{landlock} denies TCP bind/connect"), landlock.FeatTCP)),
			plus(ns("empty network namespace (loopback only)")),
			plus(bw("bubblewrap: empty network namespace (loopback only)")),
			network(sb("Seatbelt: (deny network*): no socket of the command's connects, binds or sends, unix sockets included (Mach services stay reachable under (allow default))"), spec.DenyAll),
		},
		Vectors: []string{"tcp-connect", "tcp6-connect", "udp-send", "tcp-listen", "mptcp-connect", "netlink", "vsock", "packet", "iouring-socket", "socketcall32", "x32-syscall", "egress-*", "warm-netns-fd"},
	},
	{
		Name:       spec.GCleanEnv,
		Promise:    "the environment holds no secret of the caller's: built from scratch, path lists checked",
		Mechanisms: []Mechanism{{Layer: Core, Sufficient: true, Text: "launcher: environment built from scratch"}, sb("launcher: environment built from scratch")},
		Vectors:    []string{"env-dump-canaries", "r11-caller-ldpreload-and-path", "r11-env-flag-*"},
	},
	{
		Name:    spec.GCredentials,
		Promise: "credential files inside granted directories stay unreadable",
		Mechanisms: []Mechanism{
			core("{landlock}: credential files inside read-only roots are left out of the grant; a writable root holding one is refused; confine's own control plane (its config and state directories with the capability key and the event log, the default server socket directories, the run's event log and key file, a server's own socket directory), resolved from the caller's and the launcher's environment and the user database, is never granted: left out of read-only roots, a writable root covering or inside it refused, whatever the profile waives"),
			sb("Seatbelt: every credential path under each read root denied after the grants (the last matching rule wins), present or not, and a symlinked one's target; a writable root holding one is refused"),
		},
		Vectors: []string{"read-credential-in-ro-root/*", "read-credential-ro-cargo-home", "read-credential-symlink*", "read-credential-in-workdir/*",
			"ctl-read-*", "ctl-write-*", "ctl-plant-*"},
	},
	{
		Name:    spec.GNoInheritedFDs,
		Promise: "no descriptor of the caller's reaches the command",
		Mechanisms: []Mechanism{{Layer: Core, Sufficient: true, Text: "the command marks every descriptor >= 3 close-on-exec (close_range) right before execve; stdio are fresh pipes"},
			sb("the launcher marks every descriptor >= 3 of its own close-on-exec right before it starts sandbox-exec; stdio are fresh pipes")},
		Vectors: []string{"inherited-fd-*"},
	},
	{
		Name:    spec.GFSWrite,
		Promise: "writes, creates, renames, links and truncations only in the workdir, the private temp dir and granted roots",
		Mechanisms: []Mechanism{
			feat(core("{landlock}: writes only in the workdir, the private temp dir and granted roots"), landlock.FeatTruncate),
			// Below ABI 3 Landlock has no TRUNCATE right: the filter and
			// the launcher take truncation over.
			{Layer: Core, Sufficient: true, Seccomp: true, Below: landlock.FeatTruncate,
				Text: "{landlock}: writes only in the workdir, the private temp dir and granted roots; seccomp: O_TRUNC opens without write access refused, openat2 ENOSYS, truncate(2) resolved once and performed by the launcher only inside writable roots"},
			plus(Mechanism{Layer: Core, Seccomp: true, Below: landlock.FeatRefer,
				Text: "renames and links across directories (Landlock ABI 1 refuses them all) performed by the launcher only between directories inside writable roots"}),
			plus(ns("mount namespace: a read-only empty root holding only the granted roots (read-only ones bound read-only), /dev holds only the granted device nodes, /dev/shm is a private per-run tmpfs")),
			plus(bw("bubblewrap mount namespace: only the granted roots exist, /dev holds only the granted device nodes, /dev/shm is a private per-run tmpfs")),
			sb("Seatbelt: (deny file-write*), reopened for the workdir, the private temp dir, granted roots and the listed device nodes; the shared /private/tmp and /private/var/tmp are not"),
		},
		Vectors: []string{"write-file-*", "append-file-outside", "truncate-file-*", "truncate-via-workdir-symlink", "open-rdonly-trunc-*", "open-accmode3-trunc-ro-root", "openat2-trunc-ro-root",
			"rename-out", "rename-in", "rename-exchange-out", "link-out", "link-in-then-write", "link-in-follow-then-write", "symlink-write*", "mknod-*", "tmp-write", "shm-write"},
	},
	{
		Name:    spec.GFSRead,
		Promise: "reads and exec only in declared roots; never /dev wholesale",
		Mechanisms: []Mechanism{
			core("{landlock}: reads only in declared roots; /proc limited to non-process entries"),
			plus(ns("mount namespace: nothing but the granted roots exists (what Landlock refuses cannot even be stat()ed)")),
			plus(bw("bubblewrap mount namespace: nothing but the granted roots is mounted")),
			sb("Seatbelt: (deny file-read*), reopened for the system roots, toolchains, the workdir, the private temp dir and the listed device nodes (and the metadata of their parent directories)"),
		},
		Vectors: []string{"read-file-shadow", "read-file-outside", "iouring-openat-*", "open-by-handle", "block-device"},
	},
	{
		Name:    spec.GFSMetadata,
		Promise: "chmod, chown, utimes and xattrs only inside writable roots",
		Mechanisms: []Mechanism{
			coreSC("seccomp user notification: chmod/chown/utimes/xattr resolved and performed by the launcher (the supervisor under bubblewrap) only inside writable roots (a task's descriptor reached through pidfd_getfd, or /proc/<tid>/fd where that is refused)"),
			sb("Seatbelt: file-write* covers file-write-mode, -owner, -times, -xattr and -flags, denied outside the writable roots"),
		},
		Vectors: []string{"chmod-*", "chown-*", "utimes-*", "setxattr-*", "removexattr-*", "fchmod-ro-*"},
	},
	{
		// The persistence guard (issue 12): git on the host later runs
		// hooks and configured programs from .git, so a command that may
		// write the work tree must not write its .git.
		Name:    spec.GGitPersistence,
		Promise: "the .git of the work tree and of every writable root (hooks, config, attributes, objects, refs) cannot be changed, renamed or replaced; where the mechanism says so, no new .git can be created anywhere the command writes; other persistence paths are reported",
		Mechanisms: []Mechanism{
			{Layer: Core, Sufficient: true, NoGitDir: true,
				Text: "no .git in the work tree: nothing to keep (one the command creates is reported in persistence)"},
			{Layer: Core, Sufficient: true, GitDir: true, Alone: true, Seccomp: true,
				Text: "{landlock}: the entries on the way to each .git (the work tree's and every nested repository's at any depth, a gitfile and the git directory it names) granted one by one, and the .git only read; the launcher's truncate, rename and metadata calls skip .git, and it refuses to move a directory holding one; " +
					"no new .git (nor .GIT, .git., git~1 and the like) anywhere in the writable roots: seccomp user notification sends every call that creates a name (mkdir, symlink, mknod, rename, link, creat, open with O_CREAT; openat2 ENOSYS), the launcher reads the name once, refuses those and performs the rest itself with the command's credentials (never resumed: a second thread could change the name): where every parent directory lies inside a writable root, outside .git, and the entry is not .git nor on the way to it, on its own thread, else on a thread confined by the run's own Landlock rules; " +
					"new top-level entries work: unlink, rmdir, truncate and opens for writing are sent too and performed by the launcher (with the command's credentials, through the descriptor the path resolved to) on regular files inside the writable roots and outside .git, every other one resumed under the command's own Landlock domain; a new entry matching a row the profile's [guard] refuses is refused alike (and a directory moved where it would carry one)"},
			{Layer: Namespaces, Sufficient: true, GitDir: true, Seccomp: true,
				Text: "mount namespace: each .git (the work tree's and every nested repository's at any depth) bound read-only over the writable tree (a mount point: it cannot be renamed or removed, and the renames the launcher performs refuse the command's mount points, EBUSY, as its kernel would); the launcher's truncate, rename and metadata calls skip it, and it refuses to move a directory holding one; " +
					"no new .git (nor .GIT, .git., git~1 and the like) anywhere in the writable roots: seccomp user notification sends every call that creates a name, the launcher reads the name once, refuses those and performs the rest itself with the command's credentials (never resumed), on a thread confined by the run's own Landlock rules, " +
					"resolving each path in the command's own tree (from its root, working directory or descriptor; symlinks followed one at a time, never out of its root; its /proc symlinks refused), so the command's mounts, .git's read-only one included, apply; on Landlock ABI 1 renames across directories are performed by the launcher too, resolved there alike; a new entry matching a row the profile's [guard] refuses is refused alike (and a directory moved where it would carry one)"},
			{Layer: Bwrap, Sufficient: true, GitDir: true,
				Text: "bubblewrap mount namespace: each .git (the work tree's and every nested repository's at any depth) bound read-only over the writable tree (a mount point: it cannot be renamed or removed, though a directory holding one can be moved); the supervisor's truncate, rename and metadata calls skip it; a new .git below the top level is not refused, only reported (in a top-level directory or at a .gitmodules path); a profile whose [guard] refuses rows besides git's is refused (its supervisor cannot refuse new entries by name)"},
			// persistence reports are Linux only (internal/persist).
			{Layer: Seatbelt, Sufficient: true, NoGitDir: true,
				Text: "no .git in the work tree: nothing to keep (one the command creates is neither refused nor reported: macOS has no persistence report)"},
			{Layer: Seatbelt, Sufficient: true, GitDir: true,
				Text: "Seatbelt: (deny file-write* (subpath <work tree>/.git)) after the grants (the last matching rule wins); a new .git below the top level is neither refused nor reported, nor are the other persistence paths: macOS has no persistence report"},
		},
		Vectors: []string{"git-*"},
	},
	{
		Name:    spec.GUnixSockets,
		Promise: "no connection to a unix socket outside the run (pathname or abstract) unless granted",
		Mechanisms: []Mechanism{
			// connect() is the only way to address a stream or
			// seqpacket peer (sendto/sendmsg ignore or refuse an
			// address on them), datagram sockets are refused, and
			// the handler refuses every abstract address: this holds
			// at every Landlock ABI.
			coreSC("seccomp user notification on connect: the launcher connects only to pathname sockets inside writable roots (or granted) and refuses every abstract address; unix datagram sockets refused, so sendto/sendmsg cannot name a peer; where pidfd_getfd is refused (Docker), the launcher connects a fresh socket of the task's type and installs it over the task's descriptor (SECCOMP_IOCTL_NOTIF_ADDFD), bound sockets refused; confine's own server refuses a client inside a run, wherever its socket lies: one with no_new_privs and more seccomp filters than the server, or one holding a seccomp listener (the supervisor connecting for its command), checked through SO_PEERPIDFD"),
			plus(feat(core("{landlock} abstract-socket scope"), landlock.FeatScope)),
			plus(ns("network namespace (abstract sockets are per namespace) and mount namespace (the host's /run, /tmp and /dev/shm absent)")),
			plus(bw("bubblewrap network namespace (abstract sockets are per namespace) and mount namespace (the host's /run, /tmp and /dev/shm absent)")),
			sb("Seatbelt: (deny network*) refuses connecting to any unix socket (macOS has no abstract ones)"),
		},
		Vectors: []string{"abstract-unix", "unix-connect-outside", "unix-dgram-outside", "ctl-serve-*", "warm-netns-abstract-unix"},
	},
	{
		Name:    spec.GSignals,
		Promise: "no signal, and no other call that acts on a process by pid or pidfd (resource limits, CPU affinity, scheduling, priority, I/O priority, memory placement, F_SETOWN), reaches a process outside the run",
		Mechanisms: []Mechanism{
			// Landlock's scope covers signals only; the other calls
			// that name a process are the supervisor's at every ABI.
			feat(coreSC("{landlock} signal scope (also SIGIO/SIGURG of F_SETOWN, at delivery); seccomp: prlimit, sched_set*, setpriority, ioprio_set, migrate_pages and move_pages pass only for the caller itself (pid 0, its own pid or tid), the launcher refuses every other target (a pid it checked could be reused before the kernel acts); PRIO_USER, IOPRIO_WHO_USER and another process group refused"), landlock.FeatScope),
			{Layer: Core, Sufficient: true, Seccomp: true, Below: landlock.FeatScope,
				Text: "seccomp user notification: the launcher sends kill, tkill, tgkill, rt_sigqueueinfo and pidfd_send_signal itself, through a pidfd it opened and checked alive, only to the run's processes (descendants of its init) and with the command's credentials; prlimit, sched_set*, setpriority, ioprio_set, migrate_pages and move_pages pass only for the caller itself, every other target refused; F_SETOWN may name only the caller, F_SETOWN_EX, FIOSETOWN and SIOCSPGRP refused"},
			ns("PID namespace (no process outside the run is visible) with its own /proc"),
			bw("bubblewrap PID namespace (no process outside the run is visible) with its own /proc"),
		},
		Vectors: []string{"kill", "kill-foreign", "kill-group-foreign", "tgkill-foreign", "sigqueue-foreign", "pidfd-send-signal-foreign",
			"prlimit-foreign*", "setaffinity-foreign*", "setpriority-foreign*", "setpriority-user*", "ioprio-foreign*", "fcntl-setown-foreign"},
	},
	{
		Name:    spec.GProcInspect,
		Promise: "no ptrace, process memory access, or reading of other processes' /proc entries",
		Mechanisms: []Mechanism{
			coreSC("seccomp denies ptrace/process_vm_*/pidfd_getfd; {landlock} keeps other processes' /proc entries unreadable"),
			plus(ns("PID namespace (no process outside the run is visible) with its own /proc")),
			plus(bw("bubblewrap PID namespace (no process outside the run is visible) with its own /proc")),
		},
		Vectors: []string{"ptrace", "process-vm-readv", "proc-read-*"},
	},
	{
		Name:    spec.GTerminal,
		Promise: "no input pushed into the caller's terminal",
		Mechanisms: []Mechanism{coreSC("setsid (no controlling terminal) + seccomp denies TIOCSTI/TIOCLINUX"),
			sb("setsid (no controlling terminal: /dev/tty opens fail, and macOS refuses TIOCSTI on a terminal that is not the caller's controlling one to non-root); stdio are fresh pipes; Seatbelt grants no other terminal device")},
		Vectors: []string{"tiocsti-*", "tioclinux-pts-path"},
	},
	{
		Name:       spec.GKernelSurface,
		Promise:    "none of the kernel attack surface a build never needs: bpf, perf, userfaultfd, keyrings, mounts, namespaces, modules",
		Mechanisms: []Mechanism{coreSC("seccomp denies bpf, perf_event_open, userfaultfd, keyctl, mount, namespaces, module/kexec and similar")},
		Vectors:    []string{"userns", "clone-newuser", "clone3-newuser", "mount", "keyctl", "bpf", "perf", "userfaultfd"},
	},
	{
		Name:    spec.GResources,
		Promise: "bounded wall time, CPU time, memory, file size, open files and output",
		Mechanisms: []Mechanism{
			// Where no cgroup can be made the launcher bounds the tree by
			// sampling it: what it does not count is said, not hidden.
			{Layer: Core, Sufficient: true, MemoryCgroup: true, Text: "memory cgroup of the run (a child of the launcher's own; on cgroup v2 beside it, in the nearest ancestor the launcher may write, and never above its own memory.max; not under bubblewrap): the whole tree's memory at --memory (anonymous, shared and tmpfs pages, page cache; swap not allowed), an OOM kill reported as oom_killed, the peak as peak_memory_bytes; rlimits: CPU, file size, open files, core=0; wall timeout; bounded capture"},
			{Layer: Core, Sufficient: true, UnlessMemoryCgroup: true, Text: "memory watch (no memory cgroup can be made here): the launcher samples the resident memory of every process of the run (anonymous, shared-memory and swapped-out pages; RSS, so a shared page counts once per process that maps it) every 10 to 200 ms, more often near the bound, and kills the whole run once the sum passes --memory (memory_limit_killed; it may pass by what the tree allocates in one interval); memory-backed files (tmpfs, memfd) the tree holds open count whole; a tmpfs file no process holds open, pipe buffers and socket queues are not counted; each process also at --memory by RLIMIT_DATA; rlimits: CPU, file size, open files, core=0; wall timeout; bounded capture"},
		},
		Vectors: []string{"memory-bomb-*"},
	},
	{
		Name:    spec.GProcesses,
		Promise: "a bounded number of processes",
		Mechanisms: []Mechanism{
			who(core("RLIMIT_NPROC (per uid)"), NonRoot),
			{Layer: Core, Sufficient: true, Who: Root, PidsCgroup: true, UnlessPidMax: true, Text: "pids cgroup, at --max-procs + 16 tasks with the run's init (uid 0 is exempt from RLIMIT_NPROC; on cgroup v2, where a process is in one cgroup only, the command's tasks are bounded in its memory cgroup)"},
			{Layer: Namespaces, Sufficient: true, Who: Root, PidMax: true, Text: "pid_max of the run's PID namespace (uid 0 is exempt from RLIMIT_NPROC)"},
			// A stock container run as root: no pids cgroup can be made
			// (cgroupfs is read-only) and no namespace either. Exact:
			// see internal/notify/fork.go for why it never lets the run
			// pass the limit.
			{Layer: Core, Sufficient: true, Who: Root, Seccomp: true, UnlessPidsCgroup: true, UnlessPidMax: true,
				Text: "seccomp user notification: the launcher counts the run's tasks (threads included) at clone/fork/vfork and fails them with EAGAIN at --max-procs, never past it (uid 0 is exempt from RLIMIT_NPROC)"},
		},
		Vectors: []string{"fork-bomb", "fork-bomb-no-pids-cgroup", "fork-race-no-pids-cgroup", "fork-race-core"},
	},
	{
		Name:    spec.GTreeKill,
		Promise: "on exit, timeout, cancel or launcher death every descendant is gone",
		Mechanisms: []Mechanism{
			{Layer: Core, Sufficient: true, Text: "the run's init is a child subreaper: every descendant is killed and reaped, also on launcher death (the init then becomes the reaper)"},
			plus(ns("PID namespace (when its init exits, the kernel kills every process left in it)")),
			plus(bw("bubblewrap PID namespace (when its init exits, the kernel kills every process left in it) and --die-with-parent")),
			plus(sb("process group SIGTERM, grace, SIGKILL, and a sweep of the descendants sysctl kern.proc lists (a process that setsid()s and double-forks is reparented to launchd and escapes both)")),
		},
		Vectors: []string{"setsid-daemon"},
	},
	{
		Name:    spec.GNoPrivilege,
		Promise: "no privilege: no_new_privs, every capability dropped, and no set-user-ID or set-group-ID file left behind",
		Mechanisms: []Mechanism{
			coreSC("no_new_privs; no capability in the effective, permitted, inheritable or ambient set; launched as root, the bounding set emptied and securebits locked (an unprivileged launcher cannot empty the bounding set, which grants nothing under no_new_privs); seccomp: set-ID modes refused in open, openat, creat, mknod and mknodat, openat2 ENOSYS, and the launcher refuses S_ISUID (S_ISGID on non-directories) in the chmod family"),
			plus(ns("every bound root mounted nosuid")),
			plus(bw("bubblewrap binds every root nosuid")),
		},
		Vectors: []string{"privilege", "chmod-setuid-workdir", "chmod-setgid-workdir", "open-creat-setuid", "open-creat-setgid", "open-tmpfile-setuid", "mknod-setuid", "openat2-creat-setuid"},
	},
}
