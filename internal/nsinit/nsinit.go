//go:build linux

// Package nsinit is the namespaces layer of the landlock+namespaces
// provider: how the supervisor clones stage-2 into new user, PID, mount,
// network, IPC and UTS namespaces, and how stage-2, as the PID namespace's
// init, sets up the mount and network namespaces before the command's
// stage-3 confines itself.
//
// The namespaces add to the Landlock + seccomp core, they replace none of
// it: every guarantee is still enforced inside by the same Landlock
// ruleset and seccomp filter (which also keeps the command from creating
// namespaces of its own).
package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
)

// Flags are the namespaces stage-2 is cloned into.
const Flags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// Hostname is the UTS namespace's host name.
const Hostname = "confine"

// DefaultPrivate are the directories that get a fresh tmpfs the command
// may write (POSIX shared memory and semaphores live there); DefaultHide
// those covered by an empty one: the host's sockets and temporary files,
// and where users, services and add-on software keep their data (homes,
// mounts, /opt, /srv). Landlock already denies reading them; covered, they
// cannot even be listed or stat()ed, and the roots of the run that lie
// beneath (the work directory, a toolchain under /opt or ~) are bound
// back at their own paths.
//
// A tmpfs with roots bound back beneath it is never writable: Landlock
// rules follow the path through mount points, so a writable /tmp would
// make every root bound under it writable too. That is why /tmp, which
// holds the run's private directory, is hidden rather than private.
var (
	DefaultPrivate = []string{"/dev/shm"}
	DefaultHide    = []string{"/tmp", "/run", "/var/run", "/var/tmp", "/home", "/root", "/mnt", "/media", "/srv", "/opt"}
)

// reservedPids are the pids the kernel skips when it wraps around
// (RESERVED_PIDS), also in a PID namespace.
const reservedPids = 300

// PidMax returns the pid_max for a PID namespace that may hold at least
// procs processes (at most procs+300: once the numbers wrap, the first
// 300 are skipped), or 0 when this kernel has no per-namespace pid_max
// (before 6.14) or the host's is lower.
func PidMax(procs int) int {
	if procs <= 0 || !perNamespacePidMax() {
		return 0
	}
	n := procs + reservedPids + 1
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0
	}
	host, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n > host {
		return 0
	}
	return n
}

// perNamespacePidMax: kernel.pid_max is per PID namespace since 6.14.
func perNamespacePidMax() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 14
}

// MaxTmpfsBytes caps each private tmpfs (it is memory, which RLIMIT_AS
// does not count).
const MaxTmpfsBytes = 1 << 30

// Mappings returns the ids a supervisor running as euid/egid maps into the
// user namespace for a command that runs as uid/gid (-1: as the
// supervisor). Every id maps to itself. An unprivileged supervisor may map
// only its own ids, and must deny setgroups(2) to map its gid; root maps 0
// (stage-2 then keeps its capabilities across exec) and the command's ids.
func Mappings(euid, egid, uid, gid int) (uids, gids []int, setgroups bool) {
	if euid != 0 {
		return []int{euid}, []int{egid}, false
	}
	uids, gids = []int{0}, []int{0}
	if uid > 0 {
		uids = append(uids, uid)
	}
	if gid > 0 {
		gids = append(gids, gid)
	}
	return uids, gids, true
}

// SysProcAttr is what the supervisor starts stage-2 with. Stage-2 keeps
// CAP_SYS_ADMIN and CAP_NET_ADMIN of its user namespace across the exec as
// ambient capabilities when it is not root there; it drops the ambient set
// before it starts stage-3, which drops everything else.
func SysProcAttr(ns *plan.Namespaces) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{
		Cloneflags:                 Flags,
		Pdeathsig:                  syscall.SIGKILL,
		GidMappingsEnableSetgroups: ns.Setgroups,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN},
	}
	for _, id := range ns.UIDs {
		a.UidMappings = append(a.UidMappings, syscall.SysProcIDMap{ContainerID: id, HostID: id, Size: 1})
	}
	for _, id := range ns.GIDs {
		a.GidMappings = append(a.GidMappings, syscall.SysProcIDMap{ContainerID: id, HostID: id, Size: 1})
	}
	return a
}

// CloneWorks reports whether this process may create a user namespace,
// by starting a child in one that execs a path that does not exist: the
// clone either fails (EPERM under Docker's default seccomp profile or
// kernel.unprivileged_userns_clone=0, ENOSPC with user.max_user_namespaces=0)
// or the exec does (ENOENT), which proves the clone worked. It costs one
// fork, no program start.
func CloneWorks() error {
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}}
	pid, err := syscall.ForkExec("/nonexistent/confine-userns-probe", []string{"confine-userns-probe"}, attr)
	if err == nil {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		return nil
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("clone(CLONE_NEWUSER): %w", err)
}

// Setup prepares the namespaces stage-2 was cloned into; it must run in
// the new PID namespace's init (mounting its /proc needs that). roots are
// every path the command's Landlock ruleset names: those beneath a
// private or hidden directory are bind-mounted back at their own paths,
// so the command sees exactly what it saw without namespaces there.
//
// Mounts: / recursively private (nothing propagates to or from the host),
// a fresh tmpfs on ns.Private and ns.Hide, the roots back, then a /proc of
// the new PID namespace. Network: the loopback interface up (the namespace
// has no other). UTS: the host name. It returns the directories it
// covered.
func Setup(ns *plan.Namespaces, roots []string) ([]Cover, error) {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make / private: %w", err)
	}
	rs := resolveAll(roots)
	covers := covers(ns, rs)
	binds, links, err := rebinds(covers, rs)
	if err != nil {
		return nil, err
	}
	for i := range covers {
		for _, b := range binds {
			covers[i].bound = covers[i].bound || within(b.path, covers[i].dir)
		}
		for _, l := range links {
			covers[i].bound = covers[i].bound || within(l[0], covers[i].dir)
		}
	}
	defer func() {
		for _, b := range binds {
			unix.Close(b.fd)
		}
	}()
	for _, c := range covers {
		if err := unix.Mount("tmpfs", c.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, c.TmpfsOptions(ns)); err != nil {
			return nil, fmt.Errorf("mount tmpfs on %s: %w", c.dir, err)
		}
	}
	for _, b := range binds {
		if err := b.mount(); err != nil {
			return nil, err
		}
	}
	for _, l := range links {
		if err := os.MkdirAll(filepath.Dir(l[0]), 0o755); err != nil {
			return nil, fmt.Errorf("recreate symlink %s: %w", l[0], err)
		}
		if err := os.Symlink(l[1], l[0]); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("recreate symlink %s: %w", l[0], err)
		}
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return nil, fmt.Errorf("mount /proc of the new PID namespace: %w", err)
	}
	if err := LoopbackUp(); err != nil {
		return nil, err
	}
	if ns.Hostname != "" {
		if err := unix.Sethostname([]byte(ns.Hostname)); err != nil {
			return nil, fmt.Errorf("sethostname: %w", err)
		}
	}
	return covers, nil
}

// Cover is a directory Setup mounts a tmpfs on.
type Cover struct {
	dir     string
	private bool
	bound   bool // roots were bound back beneath it
}

// Dir is the covered directory.
func (c Cover) Dir() string { return c.dir }

// Writable says the command may write the tmpfs: a private one with no
// root bound back beneath it.
func (c Cover) Writable() bool { return c.private && !c.bound }

// root is a root as given (cleaned) and with its symlinks resolved ("" when
// it does not exist).
type root struct{ path, resolved string }

func resolveAll(roots []string) []root {
	return resolveWith(roots, resolved)
}

func resolveWith(roots []string, resolve func(string) string) []root {
	out := make([]root, len(roots))
	for i, r := range roots {
		out[i] = root{filepath.Clean(r), resolve(r)}
	}
	return out
}

func covers(ns *plan.Namespaces, roots []root) []Cover {
	var out []Cover
	add := func(dirs []string, private bool) {
		for _, d := range dirs {
			var st unix.Stat_t
			if unix.Lstat(d, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
				continue
			}
			inRoot := false
			for _, r := range roots {
				if within(d, r.path) || within(d, r.resolved) {
					inRoot = true
					break
				}
			}
			if !inRoot {
				out = append(out, Cover{dir: d, private: private})
			}
		}
	}
	add(ns.Private, true)
	add(ns.Hide, false)
	return out
}

// bind is a root to mount back once its directory is covered.
type bind struct {
	path string // where, the root with symlinks resolved
	fd   int    // O_PATH descriptor opened before the cover
	dir  bool
}

func (b bind) mount() error {
	if err := os.MkdirAll(filepath.Dir(b.path), 0o755); err != nil {
		return fmt.Errorf("bind %s back: %w", b.path, err)
	}
	if b.dir {
		if err := os.Mkdir(b.path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("bind %s back: %w", b.path, err)
		}
	} else {
		f, err := os.OpenFile(b.path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return fmt.Errorf("bind %s back: %w", b.path, err)
		}
		f.Close()
	}
	// The descriptor's magic link reaches the root through the mount it
	// was opened on, which the tmpfs now hides.
	src := "/proc/self/fd/" + strconv.Itoa(b.fd)
	if err := unix.Mount(src, b.path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s back: %w", b.path, err)
	}
	return nil
}

// rebinds opens every root that lies beneath a covered directory (the
// outermost ones: a root inside another comes back with it) and lists the
// roots that are symlinks there, as [link, target] pairs to recreate.
func rebinds(covers []Cover, roots []root) (binds []bind, links [][2]string, err error) {
	paths, links := bindPaths(covers, roots)
	for _, p := range paths {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			for _, b := range binds {
				unix.Close(b.fd)
			}
			return nil, nil, fmt.Errorf("open %s to bind it back: %w", p, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			continue
		}
		binds = append(binds, bind{path: p, fd: fd, dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	return binds, links, nil
}

// bindPaths lists the outermost resolved roots beneath a covered directory
// and the roots that are symlinks there.
func bindPaths(covers []Cover, roots []root) (paths []string, links [][2]string) {
	under := func(p string) bool {
		for _, c := range covers {
			if within(p, c.dir) && p != c.dir {
				return true
			}
		}
		return false
	}
	var all []string
	seen := map[string]bool{}
	for _, r := range roots {
		if under(r.path) {
			var st unix.Stat_t
			if unix.Lstat(r.path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
				if t, err := os.Readlink(r.path); err == nil {
					links = append(links, [2]string{r.path, t})
				}
			}
		}
		t := r.resolved
		if t == "" || !under(t) || seen[t] {
			continue
		}
		seen[t] = true
		all = append(all, t)
	}
	sort.Strings(all)
	for _, p := range all {
		if len(paths) > 0 && within(p, paths[len(paths)-1]) {
			continue
		}
		paths = append(paths, p)
	}
	return paths, links
}

// Layout is what Setup would mount, decided without mounting anything: a
// launcher that forks the init itself prepares it, and the init carries it
// out with prepared system calls.
type Layout struct {
	Covers []Cover
	// Binds are the roots to bind back, outermost first.
	Binds []BindPath
	// Links are [link, target] pairs to recreate beneath the covers.
	Links [][2]string
}

// BindPath is a root to bind back at its own path once its directory is
// covered.
type BindPath struct {
	Path string
	Dir  bool
}

// PlanLayout computes the Layout for ns and roots. resolve returns a root
// with its symlinks resolved, or "" when it does not exist (nil: resolve
// them here).
func PlanLayout(ns *plan.Namespaces, roots []string, resolve func(string) string) Layout {
	if resolve == nil {
		resolve = resolved
	}
	rs := resolveWith(roots, resolve)
	l := Layout{Covers: covers(ns, rs)}
	paths, links := bindPaths(l.Covers, rs)
	for _, p := range paths {
		var st unix.Stat_t
		if unix.Stat(p, &st) != nil {
			continue
		}
		l.Binds = append(l.Binds, BindPath{Path: p, Dir: st.Mode&unix.S_IFMT == unix.S_IFDIR})
	}
	l.Links = links
	for i := range l.Covers {
		for _, b := range l.Binds {
			l.Covers[i].bound = l.Covers[i].bound || within(b.Path, l.Covers[i].dir)
		}
		for _, lk := range l.Links {
			l.Covers[i].bound = l.Covers[i].bound || within(lk[0], l.Covers[i].dir)
		}
	}
	return l
}

// Private says the cover is a private, writable-size tmpfs (not a hiding
// one).
func (c Cover) Private() bool { return c.private }

// TmpfsOptions are the mount options of the cover's tmpfs.
func (c Cover) TmpfsOptions(ns *plan.Namespaces) string {
	if c.private {
		return fmt.Sprintf("mode=1777,size=%d,nr_inodes=65536", ns.TmpfsBytes)
	}
	return fmt.Sprintf("mode=0755,size=%d,nr_inodes=4096", 1<<20)
}

// resolved is p with every symlink resolved, or "" when it does not exist.
func resolved(p string) string {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return ""
	}
	return r
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	if dir == "" {
		return false
	}
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// LoopbackUp brings up "lo" in the calling thread's network namespace.
// Any socket reaches the interface ioctls; AF_UNIX always exists.
func LoopbackUp() error {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCGIFFLAGS: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP | unix.IFF_RUNNING)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: SIOCSIFFLAGS: %w", err)
	}
	return nil
}

// ProbeArg0 marks a re-exec that checks Setup works here, cloned the way
// stage-2 would be; the launch package runs Probe for it.
const ProbeArg0 = "confine-ns-probe"

// Probe is the body of the ProbeArg0 re-exec: Setup with the default
// directories and no roots. It prints why on stderr and returns 1 when a
// step fails.
func Probe() int {
	ns := &plan.Namespaces{Private: DefaultPrivate, Hide: DefaultHide, TmpfsBytes: 1 << 20, Hostname: Hostname}
	if _, err := Setup(ns, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}
