//go:build linux

// Package program turns a launch plan into a spawn.Program: the system
// calls a raw-cloned child makes between clone and execve. ForNamespaces is
// the landlock+namespaces provider (the child is the PID namespace's init,
// sets the namespaces up, then starts the command); ForCore is the
// landlock+seccomp provider (the child is a subreaping init without
// namespaces). Both end in the same confinement, in the same order.
package program

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/rlimit"
	"github.com/confine-sandbox/confine/internal/seccomp"
	"github.com/confine-sandbox/confine/internal/spawn"
	"github.com/confine-sandbox/confine/internal/tmpdir"
)

// initOpsHint is the capacity a program's step list starts with.
const initOpsHint = 384

// Prepared is a spawn.Program ready to run that remembers what each step was
// for, so that a failure names it.
type Prepared struct {
	// P is the program to start.
	P    *spawn.Program
	desc []string
	// initSteps is the number of steps that belong to the namespace set-up:
	// a failure there falls back to the core provider.
	initSteps int
}

func (b *Prepared) call(desc string, nr uintptr, args ...uintptr) spawn.Op {
	b.desc = append(b.desc, desc)
	return spawn.Call(spawn.Step(len(b.desc)), nr, args...)
}

// Describe names step s.
func (b *Prepared) Describe(s spawn.Step) string {
	switch s {
	case spawn.StepSignalfd:
		return "signalfd"
	case spawn.StepFork:
		return "fork the command"
	case spawn.StepExec:
		return "execve"
	}
	if i := int(s) - 1; i >= 0 && i < len(b.desc) {
		return b.desc[i]
	}
	return "step " + strconv.Itoa(int(s))
}

// InInit says step s is part of the namespace set-up.
func (b *Prepared) InInit(s spawn.Step) bool {
	return int(s) >= 1 && int(s) <= b.initSteps || s == spawn.StepSignalfd || s == spawn.StepFork
}

// FDs are the parent's descriptors the child arranges at the fixed
// numbers of package spawn (-1: absent). Start from NoFDs, never from a
// literal: a descriptor's zero value is descriptor 0, not absent.
type FDs struct {
	Stdin, Stdout, Stderr, Status, Exit, Notify, Sync, Ruleset, Janitor, Cgroup, MemCgroup int
	// JoinPids: init moves itself into the run's pids cgroup (a v1
	// hierarchy, Cgroup its parent) by writing "0" to the cgroup's tasks
	// file, and out again the same way. Written by the launcher, the pid
	// of another process makes the kernel take the global threadgroup
	// lock, whose RCU grace period cost 6-15 ms of every root run here;
	// a single thread moving itself is exempt.
	JoinPids bool
	// NetNS is a network namespace made ahead (nsinit.NetPool) the
	// launcher clones the init into: no CLONE_NEWNET then, and no loopback
	// set-up (the pool did it). -1: the init gets a new one. Never passed
	// to the init or the command.
	NetNS int
}

// NoFDs returns FDs with every descriptor absent (-1).
func NoFDs() FDs {
	return FDs{Stdin: -1, Stdout: -1, Stderr: -1, Status: -1, Exit: -1, Notify: -1, Sync: -1, Ruleset: -1,
		Janitor: -1, Cgroup: -1, MemCgroup: -1, NetNS: -1}
}

// fdMsg is a prepared sendmsg(2) of one descriptor with SCM_RIGHTS.
type fdMsg struct {
	hdr  unix.Msghdr
	iov  unix.Iovec
	data [1]byte
	cmsg [64]byte
}

// pathRule is a prepared landlock_path_beneath_attr (packed: the kernel
// reads its first 12 bytes).
type pathRule struct {
	access uint64
	fd     int32
	_      int32
}

const (
	landlockAddRule      = 445 // landlock_add_rule, the same number on every architecture
	landlockRestrictSelf = 446
	landlockRulePath     = 1
)

// ForNamespaces prepares everything the init and the command do between the
// clone and execve, for the namespaces provider: the namespace set-up
// the init does, then exactly the confinement the command's child applies
// without namespaces.
func ForNamespaces(p *plan.Plan, fds FDs, rs *landlock.Ruleset, layout nsinit.Layout, filter []bpf.RawInstruction) (*Prepared, error) {
	b := &Prepared{P: &spawn.Program{Cloneflags: nsinit.Flags, ExitFD: spawn.FDExit}}
	prog := b.P
	if err := prog.SetExec(p.Path, p.Argv, p.Env); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	ns := p.Namespaces
	// The steps in order: begin, join the pids cgroup, a session of its
	// own, the new root, the namespace's network and name, the rules for
	// what exists only in here.
	init := append(b.initStart(fds), b.joinPids(p, fds)...)
	init = append(init, b.call("setsid", unix.SYS_SETSID))
	init = append(init, b.mountOps(ns, layout)...)
	if fds.NetNS >= 0 {
		prog.Cloneflags &^= unix.CLONE_NEWNET
	}
	init = append(init, b.namespaceOps(ns, fds.NetNS < 0)...)
	init = append(init, b.deferredRuleOps(rs, layout)...)
	prog.Init = init
	b.initSteps = len(b.desc)

	// rm runs in the new root only when it (with its loader and
	// libraries, which the same system roots hold) is bound there.
	if err := b.janitor(p, fds, func(rm string) bool { return layout.Shows(rm) }); err != nil {
		return nil, err
	}
	if prog.HasJanitor() {
		b.janitorCaps()
	}

	// The command is a child of init in a user namespace init created:
	// it holds every capability there until it drops them.
	cmd, err := b.confinement(p, filter, true, 1, p.Seccomp.Listener(), spawn.FDNotify, spawn.FDRuleset)
	if err != nil {
		return nil, err
	}
	prog.Cmd = cmd
	return b, nil
}

// mountOps are the init's steps that build the new root from the layout
// and pivot into it (the namespace's own /proc included, and its pid_max).
func (b *Prepared) mountOps(ns *plan.Namespaces, layout nsinit.Layout) []spawn.Op {
	prog, str := b.P, b.P.Str
	var init []spawn.Op
	add := func(o spawn.Op) { init = append(init, o) }
	add(b.call("make / private", unix.SYS_MOUNT, str(""), str("/"), str(""), unix.MS_REC|unix.MS_PRIVATE, 0))
	// Each root's mounts are cloned before the new root exists; with
	// every other descriptor closed they get FDFree, FDFree+1, ...
	attrs := map[nsinit.Kind]*unix.MountAttr{}
	for i, bp := range layout.Binds {
		fd := uintptr(spawn.FDFree + i)
		add(b.call("clone the mount of "+bp.Path, unix.SYS_OPEN_TREE, spawn.AtFDCWD, str(bp.Path),
			unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE).Want(fd))
		attr := attrs[bp.Kind]
		if attr == nil {
			attr = &unix.MountAttr{Attr_set: bp.Kind.MountAttr()}
			prog.Keep(attr)
			attrs[bp.Kind] = attr
		}
		add(b.call(bp.Kind.AttrStep(bp.Path), unix.SYS_MOUNT_SETATTR, fd, str(""),
			unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, uintptr(unsafe.Pointer(attr)), unsafe.Sizeof(*attr)))
	}
	st := layout.Stage
	add(b.call("mount the new root's tmpfs on "+st, unix.SYS_MOUNT, str("tmpfs"), str(st), str("tmpfs"), unix.MS_NOSUID|unix.MS_NODEV, str(nsinit.RootTmpfsOptions)))
	made := map[string]bool{}
	mkdirs := func(dir string) {
		for _, d := range append(nsinit.Parents(dir), dir) {
			if d != "/" && !made[d] {
				made[d] = true
				add(b.call("create "+d, unix.SYS_MKDIRAT, spawn.AtFDCWD, str(st+d), 0o755).OK(unix.EEXIST))
			}
		}
	}
	for _, c := range layout.Private {
		mkdirs(c.Dir())
		add(b.call("mount tmpfs on "+c.Dir(), unix.SYS_MOUNT, str("tmpfs"), str(st+c.Dir()), str("tmpfs"), unix.MS_NOSUID|unix.MS_NODEV, str(nsinit.TmpfsOptions(ns))))
	}
	for i, bp := range layout.Binds {
		mkdirs(parentDir(bp.Path))
		if bp.Dir {
			mkdirs(bp.Path)
		} else {
			// It may exist already: inside a read-only bind, a device
			// node granted on its own.
			add(b.call("create "+bp.Path, unix.SYS_OPENAT, spawn.AtFDCWD, str(st+bp.Path), unix.O_CREAT|unix.O_EXCL|unix.O_RDONLY|unix.O_CLOEXEC, 0o644).ToSlot(0).SkipOn(unix.EEXIST, 1))
			add(b.call("close "+bp.Path, unix.SYS_CLOSE, 0).FromSlot(0, 0))
		}
		add(b.call("bind "+bp.Path, unix.SYS_MOVE_MOUNT, uintptr(spawn.FDFree+i), str(""), spawn.AtFDCWD, str(st+bp.Path), unix.MOVE_MOUNT_F_EMPTY_PATH))
	}
	for _, l := range layout.Links {
		mkdirs(parentDir(l[0]))
		add(b.call("recreate symlink "+l[0], unix.SYS_SYMLINKAT, str(l[1]), spawn.AtFDCWD, str(st+l[0])).OK(unix.EEXIST))
	}
	add(b.call("close the cloned mounts", unix.SYS_CLOSE_RANGE, spawn.FDFree, ^uintptr(0), 0))
	mkdirs("/proc")
	add(b.call("mount /proc of the new PID namespace", unix.SYS_MOUNT, str("proc"), str(st+"/proc"), str("proc"), unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, 0))
	// The idiom of pivot_root(2): the host's root ends up stacked on the
	// new one and is detached from the namespace.
	add(b.call("enter the new root", unix.SYS_CHDIR, str(st)))
	add(b.call("pivot_root", unix.SYS_PIVOT_ROOT, str("."), str(".")))
	add(b.call("detach the host's root", unix.SYS_UMOUNT2, str("."), unix.MNT_DETACH))
	add(b.call("chdir /", unix.SYS_CHDIR, str("/")))
	add(b.call("make the new root read-only", unix.SYS_MOUNT, str(""), str("/"), str(""), unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, 0))
	if ns.PidMax > 0 {
		v := []byte(strconv.Itoa(ns.PidMax))
		prog.Keep(v)
		add(b.call("open the namespace's pid_max", unix.SYS_OPENAT, spawn.AtFDCWD, str("/proc/sys/kernel/pid_max"), unix.O_WRONLY|unix.O_CLOEXEC).ToSlot(0))
		add(b.call("set the namespace's pid_max", unix.SYS_WRITE, 0, uintptr(unsafe.Pointer(&v[0])), uintptr(len(v))).FromSlot(0, 0).Want(uintptr(len(v))))
		add(b.call("close pid_max", unix.SYS_CLOSE, 0).FromSlot(0, 0))
	}
	return init
}

// namespaceOps bring up the namespace's loopback (when the init has a
// network namespace of its own: loopback) and set its hostname.
func (b *Prepared) namespaceOps(ns *plan.Namespaces, loopback bool) []spawn.Op {
	prog, str := b.P, b.P.Str
	var init []spawn.Op
	add := func(o spawn.Op) { init = append(init, o) }
	ifr := new([40]byte)
	copy(ifr[:], "lo")
	*(*uint16)(unsafe.Pointer(&ifr[unix.IFNAMSIZ])) = unix.IFF_UP
	if loopback {
		add(b.call("loopback: socket", unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0).ToSlot(0))
		add(b.call("loopback: SIOCSIFFLAGS", unix.SYS_IOCTL, 0, unix.SIOCSIFFLAGS, prog.Ptr(unsafe.Pointer(ifr), ifr)).FromSlot(0, 0))
		add(b.call("loopback: close", unix.SYS_CLOSE, 0).FromSlot(0, 0))
	}
	if ns.Hostname != "" {
		add(b.call("sethostname", unix.SYS_SETHOSTNAME, str(ns.Hostname), uintptr(len(ns.Hostname))))
	}
	return init
}

// PrivateRules are the Landlock rules of the private tmpfs directories the
// command may write, which exist only in its mount namespace: its init adds
// them there (deferredRuleOps), and so does the supervisor's thread that
// creates names for it (notify.Create.InRoot).
func PrivateRules(rs *landlock.Ruleset, layout nsinit.Layout) []landlock.Deferred {
	var out []landlock.Deferred
	for _, c := range layout.Private {
		if c.Writable() {
			out = append(out, landlock.Deferred{Path: c.Dir(), Rights: rs.WritableDirRights()})
		}
	}
	return out
}

// deferredRuleOps add the Landlock rules for what exists only in here: the
// new /proc's entries and the private tmpfs the command may write.
func (b *Prepared) deferredRuleOps(rs *landlock.Ruleset, layout nsinit.Layout) []spawn.Op {
	prog, str := b.P, b.P.Str
	var init []spawn.Op
	add := func(o spawn.Op) { init = append(init, o) }
	deferred := append(slices.Clone(rs.Deferred), PrivateRules(rs, layout)...)
	for _, d := range deferred {
		r := &pathRule{access: d.Rights}
		prog.Keep(r)
		o := b.call("landlock: open "+d.Path, unix.SYS_OPENAT, spawn.AtFDCWD, str(d.Path), unix.O_PATH|unix.O_CLOEXEC).ToSlot(0).StoreAt(&r.fd)
		if d.Optional {
			o = o.SkipOn(unix.ENOENT, 2)
		}
		add(o)
		add(b.call("landlock: add rule for "+d.Path, landlockAddRule, spawn.FDRuleset, landlockRulePath, uintptr(unsafe.Pointer(r)), 0))
		add(b.call("landlock: close "+d.Path, unix.SYS_CLOSE, 0).FromSlot(0, 0))
	}
	return init
}

// initStart is how every init begins. PR_SET_PDEATHSIG first: from there
// on the launcher's death makes init end the tree and remove the run's
// private directory. Then the descriptors to their numbers (arrange).
// Then it waits for the launcher's go-ahead (after the
// id maps and the pids cgroup); EOF means the launcher died.
func (b *Prepared) initStart(fds FDs) []spawn.Op {
	// A namespaced init has some 300 steps: growing the slice step by
	// step wrote three times that memory, a page fault per 4 KiB, on
	// every launch.
	ops := make([]spawn.Op, 0, initOpsHint)
	if b.desc == nil {
		b.desc = make([]string, 0, initOpsHint)
	}
	add := func(o spawn.Op) { ops = append(ops, o) }
	add(b.call("set parent-death signal", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(spawn.LauncherGone)))
	ops = append(ops, b.arrange(fds, fds.Sync)...)
	one := new([1]byte)
	add(b.call("wait for the launcher", unix.SYS_READ, spawn.FDSync, b.P.Ptr(unsafe.Pointer(one), one), 1).Want(1))
	return ops
}

// joinPids moves init into the run's pids cgroup where it joins by
// itself (FDs.JoinPids), right after the go-ahead and before anything
// forks: the command and all it starts are counted from their first
// process.
func (b *Prepared) joinPids(p *plan.Plan, fds FDs) []spawn.Op {
	if !fds.JoinPids || p.PidsCgroup == "" || fds.Cgroup < 0 {
		return nil
	}
	zero := []byte("0")
	b.P.Keep(zero)
	tasks := path.Base(p.PidsCgroup) + "/tasks"
	return []spawn.Op{
		b.call("open "+p.PidsCgroup+"/tasks", unix.SYS_OPENAT, spawn.FDCgroup, b.P.Str(tasks), unix.O_WRONLY|unix.O_CLOEXEC).ToSlot(3),
		b.call("join pids cgroup "+p.PidsCgroup, unix.SYS_WRITE, 0, uintptr(unsafe.Pointer(&zero[0])), 1).FromSlot(3, 0).Want(1),
		b.call("close the pids cgroup's file", unix.SYS_CLOSE, 0).FromSlot(3, 0),
	}
}

// arrange moves fds to the fixed numbers of package spawn, then closes
// every other descriptor from spawn.FDFree on (the launcher's own,
// including other runs' pipes, must not stay open in the child). Every
// number up to FDFree must be taken, since later opens rely on getting
// FDFree onwards: an absent descriptor is replaced by a copy of spare, a
// close-on-exec descriptor that does no harm there.
func (b *Prepared) arrange(fds FDs, spare int) []spawn.Op {
	var ops []spawn.Op
	add := func(o spawn.Op) { ops = append(ops, o) }
	type move struct {
		src, dst int
		cloexec  bool
	}
	moves := []move{{fds.Stdin, 0, false}, {fds.Stdout, 1, false}, {fds.Stderr, 2, false},
		{fds.Status, spawn.FDStatus, true}, {fds.Exit, spawn.FDExit, true}, {fds.Notify, spawn.FDNotify, true},
		{fds.Sync, spawn.FDSync, true}, {fds.Ruleset, spawn.FDRuleset, true}, {fds.Janitor, spawn.FDJanitor, false},
		{fds.Cgroup, spawn.FDCgroup, true}, {fds.MemCgroup, spawn.FDMemCgroup, true}}
	for i := range moves {
		if moves[i].src < 0 {
			moves[i].src = spare
		}
	}
	// Everything first moved above the fixed numbers, then into place:
	// a source may sit on another's destination.
	for i, m := range moves {
		add(b.call("duplicate descriptor", unix.SYS_FCNTL, uintptr(m.src), unix.F_DUPFD_CLOEXEC, spawn.FDFree+2).ToSlot(i))
	}
	for i, m := range moves {
		var fl uintptr
		if m.cloexec {
			fl = unix.O_CLOEXEC
		}
		add(b.call("arrange descriptor "+strconv.Itoa(m.dst), unix.SYS_DUP3, 0, uintptr(m.dst), fl).FromSlot(i, 0))
	}
	add(b.call("close inherited descriptors", unix.SYS_CLOSE_RANGE, spawn.FDFree, ^uintptr(0), 0))
	return ops
}

// ForBwrap prepares the command of a bubblewrap run: bwrap made the
// namespaces and the mount tree, and our init inside (package
// bwrap/inside, pid 1 there) starts the command as its child with this
// program, which arranges the descriptors and applies the same
// confinement as every other run before it execs. fds.Status must be set
// (its EOF tells the init that the command exec'd). privileged says the
// init holds CAP_SETPCAP.
func ForBwrap(p *plan.Plan, fds FDs, filter []bpf.RawInstruction, privileged bool) (*Prepared, error) {
	if fds.Status < 0 {
		return nil, fmt.Errorf("program: bubblewrap command without a status pipe")
	}
	b := &Prepared{P: &spawn.Program{}}
	prog := b.P
	if err := prog.SetExec(p.Path, p.Argv, p.Env); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	cmd := b.arrange(fds, fds.Status)
	// Its parent is the init, pid 1 of bwrap's PID namespace.
	conf, err := b.confinement(p, filter, privileged, 1, p.Seccomp.Listener(), spawn.FDNotify, spawn.FDRuleset)
	if err != nil {
		return nil, err
	}
	prog.Cmd = append(cmd, conf...)
	return b, nil
}

// janitor sets what init removes when the launcher does not: the private
// directory (through the descriptor of its parent, which the namespace
// does not show), when rm can run where init is, and the pids cgroup
// (through the descriptor of its parent).
func (b *Prepared) janitor(p *plan.Plan, fds FDs, rmRuns func(string) bool) error {
	prog, str := b.P, b.P.Str
	if p.PrivateTmp != "" && fds.Janitor >= 0 {
		if rm := rmPath(); rm != "" && rmRuns(rm) {
			name := path.Base(p.PrivateTmp)
			target := "/proc/self/fd/" + strconv.Itoa(spawn.FDJanitor) + "/" + name
			if err := prog.SetJanitor(rm, []string{"rm", "-rf", "--", target}); err != nil {
				return err
			}
			// The command often leaves its private directory as it found
			// it: then rmdir does, and no rm starts. getpid (never 0)
			// marks the slot undone until the last rmdir succeeds.
			prog.JanitorDone = true
			prog.Janitor = append(prog.Janitor,
				spawn.Call(0, unix.SYS_GETPID).ToSlot(spawn.SlotJanitorDone),
				spawn.Call(0, unix.SYS_UNLINKAT, spawn.FDJanitor, str(name+"/"+tmpdir.TmpName), unix.AT_REMOVEDIR).Ignore(),
				spawn.Call(0, unix.SYS_UNLINKAT, spawn.FDJanitor, str(name+"/"+tmpdir.HomeName), unix.AT_REMOVEDIR).Ignore(),
				spawn.Call(0, unix.SYS_UNLINKAT, spawn.FDJanitor, str(name), unix.AT_REMOVEDIR).Ignore().ToSlot(spawn.SlotJanitorDone))
		}
	}
	if p.PidsCgroup != "" && fds.Cgroup >= 0 {
		// Init is in the cgroup itself: out first ("0": the writer), then
		// remove it. Into the parent's tasks where init joined that way
		// (see JoinPids: no global lock for the janitor either).
		zero := []byte("0")
		prog.Keep(zero)
		out := "cgroup.procs"
		if fds.JoinPids {
			out = "tasks"
		}
		prog.Janitor = append(prog.Janitor,
			spawn.Call(0, unix.SYS_OPENAT, spawn.FDCgroup, str(out), unix.O_WRONLY|unix.O_CLOEXEC).ToSlot(0).Ignore(),
			spawn.Call(0, unix.SYS_WRITE, 0, uintptr(unsafe.Pointer(&zero[0])), 1).FromSlot(0, 0).Ignore(),
			spawn.Call(0, unix.SYS_UNLINKAT, spawn.FDCgroup, str(path.Base(p.PidsCgroup)), unix.AT_REMOVEDIR).Ignore())
	}
	if p.MemoryCgroup != "" && fds.MemCgroup >= 0 {
		// The memory cgroup (init is not in it), once the launcher has
		// read it: it closes its end of the sync pipe then (or dies).
		buf := new([1]byte)
		prog.Keep(buf)
		prog.Janitor = append(prog.Janitor,
			spawn.Call(0, unix.SYS_READ, spawn.FDSync, uintptr(unsafe.Pointer(&buf[0])), 1).Ignore(),
			spawn.Call(0, unix.SYS_UNLINKAT, spawn.FDMemCgroup, str(path.Base(p.MemoryCgroup)), unix.AT_REMOVEDIR).Ignore())
	}
	return nil
}

// janitorCaps lets rm, run by a non-root init, remove what the command
// made unreadable to itself: init holds every capability of its user
// namespace, and keeps those rm needs across the exec as ambient ones
// (they reach only files of the ids mapped there: the run's).
func (b *Prepared) janitorCaps() {
	prog := b.P
	hdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := new([2]unix.CapUserData)
	full := uint64(1)<<(lastCap()+1) - 1
	need := []uintptr{unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH, unix.CAP_FOWNER}
	var inh uint64
	for _, c := range need {
		inh |= 1 << c
	}
	for i := range data {
		data[i].Effective = uint32(full >> (32 * i))
		data[i].Permitted = uint32(full >> (32 * i))
		data[i].Inheritable = uint32(inh >> (32 * i))
	}
	prog.Keep(hdr)
	prog.Keep(data)
	ops := []spawn.Op{spawn.Call(0, unix.SYS_CAPSET, uintptr(unsafe.Pointer(hdr)), uintptr(unsafe.Pointer(&data[0]))).Ignore()}
	for _, c := range need {
		ops = append(ops, spawn.Call(0, unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, c, 0, 0).Ignore())
	}
	prog.Janitor = append(ops, prog.Janitor...)
}

// Privileged says this process holds CAP_SETPCAP: the command may then
// lock securebits and empty its bounding set before it drops to its uid.
func Privileged() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
}

// ForCore prepares a core-provider run without a supervisor process:
// the child is an init without namespaces, a child subreaper in the
// launcher's PID namespace (spawn.Program.Subreaper), that starts the
// command with the same confinement. privileged says the launcher holds
// CAP_SETPCAP. reaper is the host binary: the init execs it as the reaper
// (package reaper) if the launcher dies.
func ForCore(p *plan.Plan, fds FDs, filter []bpf.RawInstruction, privileged bool, reaper string) (*Prepared, error) {
	b := &Prepared{P: &spawn.Program{Subreaper: true, ExitFD: spawn.FDExit}}
	prog := b.P
	if err := prog.SetExec(p.Path, p.Argv, p.Env); err != nil {
		return nil, fmt.Errorf("%s: %w", p.Path, err)
	}
	init := append(b.initStart(fds), b.joinPids(p, fds)...)
	init = append(init,
		b.call("set child subreaper", unix.SYS_PRCTL, unix.PR_SET_CHILD_SUBREAPER, 1),
		b.call("setsid", unix.SYS_SETSID),
		b.call("getpid", unix.SYS_GETPID).ToSlot(15))
	prog.Init = init
	b.initSteps = len(b.desc)
	if err := b.janitor(p, fds, func(string) bool { return true }); err != nil {
		return nil, err
	}
	if err := prog.SetGoneJanitor(reaper, []string{"confine-reaper", p.PrivateTmp, p.PidsCgroup, p.MemoryCgroup}); err != nil {
		return nil, err
	}
	cmd, err := b.confinement(p, filter, privileged, 0, p.Seccomp.Listener(), spawn.FDNotify, spawn.FDRuleset)
	if err != nil {
		return nil, err
	}
	prog.Cmd = cmd
	return b, nil
}

// StartFailure turns a child's failure report into an exit status (127:
// not found, 126: cannot execute, 125: confinement failed) and a message.
func (b *Prepared) StartFailure(path string, f *spawn.Failure) (int, string) {
	switch {
	case f.Step == spawn.StepExec && f.Errno == unix.ENOENT:
		return 127, fmt.Sprintf("%s: not found in the sandbox: %v", path, f.Errno)
	case f.Step == spawn.StepExec:
		return 126, fmt.Sprintf("%s: cannot execute: %v", path, f.Errno)
	}
	msg := b.Describe(f.Step)
	if f.Errno != 0 {
		msg += ": " + f.Errno.Error()
	}
	return 125, msg
}

// confinement is the command's confinement as prepared system calls: new session;
// credentials and capabilities; parent-death signal; no_new_privs;
// working directory; Landlock; rlimits; seccomp (last, so its filter need
// not allow the set-up); the listener handed over; fds >= 3 close-on-exec.
func (b *Prepared) confinement(p *plan.Plan, filter []bpf.RawInstruction, privileged bool, ppid uintptr, listener bool, notifyFD, rulesetFD int) ([]spawn.Op, error) {
	prog := b.P
	var ops []spawn.Op
	add := func(o spawn.Op) { ops = append(ops, o) }
	ops = append(ops, b.joinMemoryCgroup(p)...)
	add(b.call("setsid", unix.SYS_SETSID))
	add(b.call("clear ambient capabilities", unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL))
	if privileged {
		// Lock root out of regaining capabilities at exec or on setuid.
		const secbits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 | 1<<7
		add(b.call("set securebits", unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, secbits))
		for c := uintptr(0); c <= lastCap(); c++ {
			add(b.call("drop bounding capability "+strconv.Itoa(int(c)), unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c).OK(unix.EINVAL))
		}
	}
	if p.GID >= 0 {
		o := b.call("setgroups", unix.SYS_SETGROUPS, 0, 0)
		if !privileged {
			o = o.Ignore()
		}
		add(o)
		add(b.call("setresgid("+strconv.Itoa(p.GID)+")", unix.SYS_SETRESGID, uintptr(p.GID), uintptr(p.GID), uintptr(p.GID)))
	}
	if p.UID >= 0 {
		add(b.call("setresuid("+strconv.Itoa(p.UID)+")", unix.SYS_SETRESUID, uintptr(p.UID), uintptr(p.UID), uintptr(p.UID)))
	}
	capHdr := &unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	capData := new([2]unix.CapUserData)
	prog.Keep(capHdr)
	add(b.call("capset", unix.SYS_CAPSET, uintptr(unsafe.Pointer(capHdr)), prog.Ptr(unsafe.Pointer(capData), capData)))
	// Read the sets back: a capset the kernel took differently from what
	// was asked must not go unnoticed.
	capGot := new([2]unix.CapUserData)
	add(b.call("capget", unix.SYS_CAPGET, uintptr(unsafe.Pointer(capHdr)), prog.Ptr(unsafe.Pointer(capGot), capGot)))
	b.desc = append(b.desc, "check that no capability remains")
	add(spawn.CheckZero(spawn.Step(len(b.desc)), unsafe.Slice((*byte)(unsafe.Pointer(capGot)), unsafe.Sizeof(*capGot))))
	// PR_SET_PDEATHSIG is cleared by a credential change; set it after,
	// then make sure the parent was still there when it was set.
	add(b.call("set parent-death signal", unix.SYS_PRCTL, unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL)))
	check := b.call("check the parent is alive", unix.SYS_GETPPID)
	if ppid == 0 {
		// A subreaper init left its pid in slot 15.
		check = check.WantSlot(15)
	} else {
		check = check.Want(ppid)
	}
	add(check)
	add(b.call("no_new_privs", unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1))
	add(b.call("working directory "+p.Dir, unix.SYS_CHDIR, prog.Str(p.Dir)))
	add(b.call("landlock_restrict_self", landlockRestrictSelf, uintptr(rulesetFD), 0))
	lims, err := rlimit.Settings(p.Rlimits)
	if err != nil {
		return nil, err
	}
	for _, l := range lims {
		lim := &unix.Rlimit{Cur: l.Value, Max: l.Value}
		add(b.call(fmt.Sprintf("set %s to %d", l.Name, l.Value), unix.SYS_PRLIMIT64, 0, uintptr(l.Resource), prog.Ptr(unsafe.Pointer(lim), lim), 0))
	}
	ops = append(ops, b.installSeccomp(filter, listener, notifyFD)...)
	add(b.call("close inherited fds", unix.SYS_CLOSE_RANGE, 3, ^uintptr(0), unix.CLOSE_RANGE_CLOEXEC))
	return ops, nil
}

// joinMemoryCgroup are the command's first steps when the run has a
// memory cgroup.
func (b *Prepared) joinMemoryCgroup(p *plan.Plan) []spawn.Op {
	if p.MemoryCgroup == "" {
		return nil
	}
	prog := b.P
	var ops []spawn.Op
	add := func(o spawn.Op) { ops = append(ops, o) }
	// The command joins the run's memory cgroup itself, first (its
	// credentials still the init's), through the descriptor of the
	// cgroup's parent: "0" moves the writer. The init stays out: it
	// shares the launcher's address space (CLONE_VM), and the OOM
	// killer kills every process sharing its victim's, so an init in
	// the cgroup could take the launcher down with it. On v1 only
	// this thread moves ("tasks"), without the global lock a process
	// migration waits for; on v2 "cgroup.procs" migrates the process.
	join := path.Base(p.MemoryCgroup) + "/tasks"
	if p.MemoryCgroupV2 {
		join = path.Base(p.MemoryCgroup) + "/cgroup.procs"
	}
	zero := []byte("0")
	prog.Keep(zero)
	add(b.call("open "+p.MemoryCgroup+"/"+path.Base(join), unix.SYS_OPENAT, spawn.FDMemCgroup, prog.Str(join), unix.O_WRONLY|unix.O_CLOEXEC).ToSlot(3))
	add(b.call("join memory cgroup "+p.MemoryCgroup, unix.SYS_WRITE, 0, uintptr(unsafe.Pointer(&zero[0])), 1).FromSlot(3, 0).Want(1))
	add(b.call("close the memory cgroup's file", unix.SYS_CLOSE, 0).FromSlot(3, 0))
	return ops
}

// installSeccomp installs the filter (the command's last confinement
// step) and, with a listener, hands the listener over on notifyFD.
func (b *Prepared) installSeccomp(filter []bpf.RawInstruction, listener bool, notifyFD int) []spawn.Op {
	prog := b.P
	var ops []spawn.Op
	add := func(o spawn.Op) { ops = append(ops, o) }
	fprog := &unix.SockFprog{Len: uint16(len(filter)), Filter: (*unix.SockFilter)(unsafe.Pointer(&filter[0]))}
	prog.Keep(filter)
	var flags uintptr
	install := b.call("seccomp", unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, prog.Ptr(unsafe.Pointer(fprog), fprog))
	if listener {
		flags = seccomp.ListenerFlags()
		install = b.call("seccomp", unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, prog.Ptr(unsafe.Pointer(fprog), fprog))
		m := &fdMsg{}
		prog.Keep(m)
		rights := unix.UnixRights(0)
		copy(m.cmsg[:], rights)
		fdAt := (*int32)(unsafe.Pointer(&m.cmsg[unix.CmsgLen(0)]))
		m.iov.Base = &m.data[0]
		m.iov.SetLen(1)
		m.hdr.Iov = &m.iov
		m.hdr.SetIovlen(1)
		m.hdr.Control = &m.cmsg[0]
		m.hdr.SetControllen(len(rights))
		add(install.ToSlot(1).StoreAt(fdAt))
		add(b.call("hand over the seccomp listener", unix.SYS_SENDMSG, uintptr(notifyFD), uintptr(unsafe.Pointer(&m.hdr)), 0))
		add(b.call("close the seccomp listener", unix.SYS_CLOSE, 0).FromSlot(1, 0))
		add(b.call("close the listener socket", unix.SYS_CLOSE, uintptr(notifyFD)))
	} else {
		add(install)
	}
	return ops
}

// lastCap is the highest capability this kernel knows (EINVAL beyond it,
// which the drop accepts, so a guess too high costs only calls).
var lastCap = sync.OnceValue(func() uintptr {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 63
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n < 0 || n > 63 {
		return 63
	}
	return uintptr(n)
})

// rmPath is rm with its symlinks resolved (as the layout binds it), or "".
var rmPath = sync.OnceValue(func() string {
	for _, p := range []string{"/bin/rm", "/usr/bin/rm"} {
		if unix.Access(p, unix.X_OK) == nil {
			if r, err := filepath.EvalSymlinks(p); err == nil {
				return r
			}
		}
	}
	return ""
})

func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i <= 0 {
		return "/"
	}
	return p[:i]
}
