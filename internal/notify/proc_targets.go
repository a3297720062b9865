//go:build linux

package notify

// Calls that name another process by pid or pidfd (seccomp's procCalls,
// Config.NotifyProcTargets and NotifySignals). Without a PID namespace
// nothing else keeps them inside the run: Landlock scopes signals from
// ABI 6 on only, and resource limits, scheduling and I/O priority never.
//
// Reuse safety. A pid is only a number; the process it names may exit,
// be reaped and its number handed to an unrelated process between any
// check and the kernel's use of it. The handlers therefore never let the
// kernel resolve a pid they have not pinned:
//
//   - SECCOMP_USER_NOTIF_FLAG_CONTINUE only when the target is the caller
//     itself: its thread id, or its thread group id (tgkill with the
//     caller's own tgid too, since the kernel then checks the tid against
//     that group). The caller is blocked in this very call, so neither
//     number can be freed, and CONTINUE re-reads registers, not memory.
//     The thread group id is recognised without parsing the caller's
//     /proc/TID/status (ownGroup: a pidfd, one stat, one check), because
//     Go's runtime preempts its threads with tgkill to its own group: on
//     kernels without Landlock's signal scope, every build pays for this
//     test thousands of times.
//   - A signal to another process is sent by the supervisor through a
//     pidfd it opened itself: a pidfd names one process for good (it
//     never refers to a later process with the same number). Membership is
//     checked on that pidfd (member), and the signal goes out through it,
//     with the caller's credentials (threadCreds), so a signal the caller
//     could not send is not sent.
//   - Resource limits, scheduling, priority, I/O priority and memory
//     placement have no pidfd form: naming any process but the caller
//     fails with EPERM and is recorded. Forwarding them after a check would
//     race pid reuse; builds set these on themselves (pid 0).

import (
	"bytes"
	"errors"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/proctree"
)

// Init identifies the run's processes, for the handlers of calls that name
// another process and for the fork count: the run's init is a child
// subreaper (or a PID namespace's init, or bwrap above one), so every
// process of the run is its descendant for as long as it lives (orphans
// are reparented to the nearest subreaper ancestor), and no other process
// ever becomes one. The init itself is not a member, as Landlock's scope
// does not count it as one either.
type Init struct {
	// Pid is the init's process id.
	Pid int
	// Pidfd is a pidfd of Pid, opened while Pid was an unreaped child of
	// the caller (so it names the init and not a reuse of its number).
	// Serve does not close it; it must stay open until Serve returns.
	Pidfd int
}

func isProcKind(k sysKind) bool { return k >= sysPrlimit && k <= sysFcntl }

// Constants the handlers compare against (asm-generic values, the same on
// amd64 and arm64).
const (
	prioProcess      = 0 // PRIO_PROCESS
	prioPgrp         = 1 // PRIO_PGRP
	prioUser         = 2 // PRIO_USER
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS
	ioprioWhoPgrp    = 2 // IOPRIO_WHO_PGRP
	ioprioWhoUser    = 3 // IOPRIO_WHO_USER
	maxSignal        = 64
	siginfoSize      = 128
	pidfdThread      = unix.PIDFD_THREAD // O_EXCL in fdinfo's flags
	// maxDepth bounds the ancestor walk; a deeper chain is refused.
	maxDepth = 4096
)

// cont is the answer "let the kernel run the call as issued".
func cont() result { return result{cont: true} }

// procCall handles every kind of isProcKind.
func (t *task) procCall(kind sysKind) result {
	args := t.n.Data.Args
	// Decide from the registers what needs no further look: the caller
	// itself by pid 0, and forms the filter already allows.
	var pid int32
	switch kind {
	case sysPrlimit:
		if args[2] == 0 {
			// No new limit (the full 64-bit pointer is NULL): a query,
			// which /proc/PID/limits answers to anyone anyway.
			return cont()
		}
		pid = int32(args[0])
	case sysSchedPid, sysMemPid:
		pid = int32(args[0])
	case sysSetpriority, sysIoprioSet:
		proc, pgrp, user := int32(prioProcess), int32(prioPgrp), int32(prioUser)
		if kind == sysIoprioSet {
			proc, pgrp, user = ioprioWhoProcess, ioprioWhoPgrp, ioprioWhoUser
		}
		switch which, who := int32(args[0]), int32(args[1]); {
		case which == user || which == pgrp && who != 0:
			// The filter refuses these already.
			return deny(unix.EPERM, "names a user or another process group", "")
		case which != proc:
			// The caller's own group, or an invalid "which" (EINVAL).
			return cont()
		}
		pid = int32(args[1])
	case sysKill:
		pid = int32(args[0])
	case sysFcntl:
		if int32(args[1]) == unix.F_SETOWN_EX {
			return deny(unix.EPERM, "F_SETOWN_EX names the owner in memory; use F_SETOWN", "")
		}
		if int32(args[1]) != unix.F_SETOWN {
			return cont()
		}
		pid = int32(args[2])
	case sysTkill, sysTgkill, sysRtSigqueueinfo, sysRtTgsigqueueinfo, sysPidfdSendSignal:
		pid = -1 // always looked at below
	}
	if pid == 0 && kind != sysTkill && kind != sysTgkill && kind != sysRtSigqueueinfo &&
		kind != sysRtTgsigqueueinfo && kind != sysPidfdSendSignal {
		return cont()
	}
	if pid == int32(t.tid) && kind != sysPidfdSendSignal && kind != sysTgkill && kind != sysRtTgsigqueueinfo {
		return cont()
	}
	// The caller's own thread group, named by number, is the caller too
	// (for tgkill and rt_tgsigqueueinfo: the kernel then signals a thread
	// only if it is in that group). Anything else needs the status.
	grp := pid
	switch kind {
	case sysTgkill, sysRtTgsigqueueinfo, sysRtSigqueueinfo:
		grp = int32(args[0])
	case sysTkill, sysPidfdSendSignal:
		grp = 0
	}
	if grp > 0 && t.ownGroup(int(grp)) {
		return cont()
	}

	st, ok := t.h.readStatus(t.tid, false)
	switch {
	case !t.valid():
		// The caller is gone or interrupted: nobody waits for the
		// answer, and its tid may name another task by now.
		return fail(unix.EINTR)
	case !ok:
		return deny(unix.EACCES, "cannot read the caller's status", "")
	}
	return t.procDecide(kind, pid, &st)
}

// procDecide is procCall's decision once the caller's status st is read:
// a call naming the caller itself runs, a signal goes to signalProcess,
// signalThread or signalRun, anything else naming another process is
// refused. pid is what procCall found the call names.
func (t *task) procDecide(kind sysKind, pid int32, st *taskStatus) result {
	args := t.n.Data.Args
	self := func(p int32) bool { return p == int32(t.tid) || p == int32(st.tgid) }
	switch kind {
	case sysPrlimit, sysSchedPid, sysMemPid, sysSetpriority, sysIoprioSet:
		if pid < 0 || self(pid) {
			// A negative pid fails in the kernel without naming anyone.
			return cont()
		}
		return deny(unix.EPERM, "names another process (pid "+strconv.Itoa(int(pid))+"); only the caller itself may be named", "")
	case sysFcntl:
		if self(pid) {
			return cont()
		}
		return deny(unix.EPERM, "F_SETOWN names another process or group ("+strconv.Itoa(int(pid))+")", "")
	case sysKill:
		sig := int32(args[1])
		if sig < 0 || sig > maxSignal {
			return fail(unix.EINVAL)
		}
		switch {
		case pid > 0 && self(pid):
			return cont()
		case pid > 0:
			return t.signalProcess(st, int(pid), sig, nil, 0)
		case pid == -1:
			return t.signalRun(st, sig, -1)
		case pid == -1<<31:
			return fail(unix.ESRCH)
		default:
			return t.signalRun(st, sig, int(-pid))
		}
	case sysTkill:
		tid, sig := int32(args[0]), int32(args[1])
		if tid <= 0 {
			return fail(unix.EINVAL)
		}
		if tid == int32(t.tid) {
			return cont()
		}
		return t.signalThread(st, 0, int(tid), sig, nil)
	case sysTgkill, sysRtTgsigqueueinfo:
		tgid, tid, sig := int32(args[0]), int32(args[1]), int32(args[2])
		if tgid <= 0 || tid <= 0 {
			return fail(unix.EINVAL)
		}
		if tgid == int32(st.tgid) {
			// The kernel signals tid only if it is in the caller's own
			// (pinned) thread group: Go's preemption, raise(), abort().
			return cont()
		}
		var info *unix.Siginfo
		if kind == sysRtTgsigqueueinfo {
			var e unix.Errno
			if info, e = t.siginfo(args[3], sig); e != 0 {
				return fail(e)
			}
		}
		return t.signalThread(st, int(tgid), int(tid), sig, info)
	case sysRtSigqueueinfo:
		tgid, sig := int32(args[0]), int32(args[1])
		if tgid > 0 && self(tgid) {
			return cont()
		}
		if tgid <= 0 {
			// Process groups are not accepted here by the kernel either.
			return fail(unix.ESRCH)
		}
		info, e := t.siginfo(args[2], sig)
		if e != 0 {
			return fail(e)
		}
		return t.signalProcess(st, int(tgid), sig, info, 0)
	case sysPidfdSendSignal:
		return t.pidfdSendSignal(st)
	}
	return deny(unix.EACCES, "system call not handled by the supervisor", "")
}

// ownGroup reports whether x is the caller's thread group id. Three facts,
// in this order: a pidfd of x opens without PIDFD_THREAD, so at that moment
// x led a thread group, and the pidfd names that group's process; the
// caller's thread appears under /proc/x/task/, so the task holding x then
// was in the caller's group; that process still holds x afterwards (exists),
// so it held x throughout and the two facts are about one task: the
// caller's group leader. The tid named the caller during the stat if the
// caller is still blocked in this call when the answer goes out; a
// CONTINUE sent later reaches nobody (the send fails), so the answer needs
// no valid() of its own. A process keeps its number until reaped, and the
// group leader's until its last thread is gone, so x stays the caller's
// while it is blocked. Any failure answers false, and the caller takes the
// slow path through the status.
func (t *task) ownGroup(x int) bool {
	fd, err := unix.PidfdOpen(x, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(x)+"/task/"+strconv.Itoa(t.tid), &st) != nil {
		return false
	}
	return exists(fd)
}

// siginfo reads the caller's siginfo once; the supervisor sends its copy.
func (t *task) siginfo(addr uint64, sig int32) (*unix.Siginfo, unix.Errno) {
	if addr == 0 {
		return nil, unix.EFAULT
	}
	var b [siginfoSize]byte
	if e := t.mem.read(addr, b[:]); e != 0 {
		return nil, e
	}
	info := (*unix.Siginfo)(unsafe.Pointer(&b[0]))
	// rt_sigqueueinfo takes the signal from its argument; pidfd_send_signal
	// insists that both agree.
	info.Signo = sig
	c := *info
	return &c, 0
}

// send delivers sig through our pidfd fd, with the caller's credentials.
func (t *task) send(st *taskStatus, fd int, sig int32, info *unix.Siginfo, flags int) result {
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", "")
	}
	tc := t.h.tc
	defer tc.restore()
	if err := tc.become(&st.cr); err != nil {
		return deny(unix.EACCES, "cannot assume the caller's credentials: "+err.Error(), "")
	}
	err := unix.PidfdSendSignal(fd, unix.Signal(sig), info, flags)
	var en unix.Errno
	if errors.As(err, &en) {
		return fail(en)
	}
	if err != nil {
		return fail(unix.EINVAL)
	}
	return result{}
}

// signalProcess signals the process pid (a thread id names its process,
// as kill does) if it belongs to the run.
func (t *task) signalProcess(st *taskStatus, pid int, sig int32, info *unix.Siginfo, flags int) result {
	fd, tgid, e := openProcess(pid)
	if e != 0 {
		return fail(e)
	}
	defer unix.Close(fd)
	if !t.h.s.pol.member(fd, tgid) {
		return deny(unix.EPERM, "pid "+strconv.Itoa(pid)+" is not a process of this run", "")
	}
	return t.send(st, fd, sig, info, flags)
}

// signalThread signals thread tid (of thread group tgid unless 0) if it
// belongs to the run. A pidfd for a single thread needs Linux 6.9
// (PIDFD_THREAD); without it, a thread of another process is refused.
func (t *task) signalThread(st *taskStatus, tgid, tid int, sig int32, info *unix.Siginfo) result {
	fd, err := unix.PidfdOpen(tid, pidfdThread)
	switch {
	case err == unix.ESRCH:
		return fail(unix.ESRCH)
	case err != nil:
		return deny(unix.EPERM, "a signal to a thread of another process needs Linux 6.9 (PIDFD_THREAD): "+err.Error(), "")
	}
	defer unix.Close(fd)
	owner, ok := tgidOf(tid, t.h.status)
	if !ok || !exists(fd) {
		return fail(unix.ESRCH)
	}
	if tgid != 0 && owner != tgid {
		return fail(unix.ESRCH)
	}
	if !t.h.s.pol.member(fd, owner) {
		return deny(unix.EPERM, "thread "+strconv.Itoa(tid)+" is not in a process of this run", "")
	}
	return t.send(st, fd, sig, info, 0)
}

// signalRun signals every process of the run (pgid -1: kill(-1), which
// spares the caller) or every process of the run in process group pgid.
// Like the kernel, it succeeds when any signal was delivered.
func (t *task) signalRun(st *taskStatus, sig int32, pgid int) result {
	pol := &t.h.s.pol
	if pol.init == nil {
		return deny(unix.EPERM, "the run's processes are unknown", "")
	}
	pids, err := proctree.Descendants(pol.init.Pid)
	if err != nil {
		return deny(unix.EPERM, "cannot list the run's processes: "+err.Error(), "")
	}
	found := false
	var last result
	for _, pid := range pids {
		if pgid == -1 && pid == st.tgid {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		_, pg, ok := statOf(pid)
		if !ok || !exists(fd) || (pgid != -1 && pg != pgid) || !pol.member(fd, pid) {
			unix.Close(fd)
			continue
		}
		r := t.send(st, fd, sig, nil, 0)
		unix.Close(fd)
		if r.denied {
			return r
		}
		if !found || last.errno != 0 {
			last = r
		}
		found = true
	}
	if !found {
		// Signal 0 sends nothing: it only says whether the group exists
		// at all (then it lies outside the run) or is simply gone.
		if pgid == -1 || unix.Kill(-pgid, 0) == unix.ESRCH {
			return fail(unix.ESRCH)
		}
		return deny(unix.EPERM, "process group "+strconv.Itoa(pgid)+" is outside this run", "")
	}
	return last
}

// pidfdSendSignal handles pidfd_send_signal(pidfd, sig, info, flags). The
// task's pidfd cannot be taken (pidfd_getfd is refused in Docker), so the
// supervisor learns its pid from /proc/<tid>/fdinfo, opens its own pidfd
// for that number, and reads the fdinfo again: the number is shown only
// while its process lives (-1 once reaped), so seeing it before and after
// means both pidfds name the same process.
func (t *task) pidfdSendSignal(st *taskStatus) result {
	args := t.n.Data.Args
	tfd, sig, flags := int32(args[0]), int32(args[1]), int(int32(args[3]))
	if tfd < 0 {
		return fail(unix.EBADF)
	}
	pid, thread, e := t.fdinfoPid(int(tfd))
	if e != 0 {
		return fail(e)
	}
	if pid < 0 {
		return deny(unix.EPERM, "fd "+strconv.Itoa(int(tfd))+" is not a pidfd (a /proc/PID directory cannot be checked)", "")
	}
	if pid == 0 {
		return fail(unix.ESRCH)
	}
	var info *unix.Siginfo
	if args[2] != 0 {
		if info, e = t.siginfo(args[2], sig); e != 0 {
			return fail(e)
		}
	}
	of := 0
	if thread {
		of = pidfdThread
	}
	fd, err := unix.PidfdOpen(pid, of)
	if err != nil {
		return fail(unix.ESRCH)
	}
	defer unix.Close(fd)
	if again, th, e := t.fdinfoPid(int(tfd)); e != 0 || again != pid || th != thread {
		return fail(unix.ESRCH)
	}
	tgid := pid
	if thread {
		var ok bool
		if tgid, ok = tgidOf(pid, t.h.status); !ok || !exists(fd) {
			return fail(unix.ESRCH)
		}
	}
	if !t.h.s.pol.member(fd, tgid) {
		return deny(unix.EPERM, "the pidfd names pid "+strconv.Itoa(pid)+", not a process of this run", "")
	}
	return t.send(st, fd, sig, info, flags)
}

// fdinfoPid reads "Pid:" and whether "flags:" has PIDFD_THREAD from the
// caller's /proc/<tid>/fdinfo/<fd>. pid is -2 (returned as < 0 with no
// errno) for a descriptor that is not a pidfd, -1 (ESRCH) for a pidfd
// whose process is gone, 0 for one outside our PID namespace.
func (t *task) fdinfoPid(fd int) (pid int, thread bool, e unix.Errno) {
	b, ok := readSmall(procPath(t.tid, "fdinfo/"+strconv.Itoa(fd)), t.h.status)
	if !ok {
		return 0, false, unix.EBADF
	}
	pid = -2
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch string(k) {
		case "Pid":
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return 0, false, unix.EBADF
			}
			if n == -1 {
				return 0, false, unix.ESRCH
			}
			pid = n
		case "flags":
			f, err := strconv.ParseUint(string(v), 8, 32)
			if err == nil {
				thread = f&pidfdThread != 0
			}
		}
	}
	return pid, thread, 0
}

// readSmall reads a small /proc file into buf (a scratch buffer) and
// returns the filled part.
func readSmall(path string, buf []byte) ([]byte, bool) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break
		}
		n += m
	}
	return buf[:n], true
}

// openProcess opens a pidfd for the process pid names: pid itself if it
// leads its thread group, else the group of thread pid (checked after the
// group's pidfd is held, so that the thread was in it then).
func openProcess(pid int) (fd, tgid int, e unix.Errno) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err == nil {
		return fd, pid, 0
	}
	if err == unix.ESRCH {
		return -1, 0, unix.ESRCH
	}
	var buf [4096]byte
	tgid, ok := tgidOf(pid, buf[:])
	if !ok {
		return -1, 0, unix.ESRCH
	}
	if fd, err = unix.PidfdOpen(tgid, 0); err != nil {
		return -1, 0, unix.ESRCH
	}
	var st unix.Stat_t
	if unix.Stat("/proc/"+strconv.Itoa(tgid)+"/task/"+strconv.Itoa(pid), &st) != nil || !exists(fd) {
		unix.Close(fd)
		return -1, 0, unix.ESRCH
	}
	return fd, tgid, 0
}

// tgidOf reads the thread group of tid from /proc/<tid>/status.
func tgidOf(tid int, buf []byte) (int, bool) {
	b, ok := readSmall(procPath(tid, "status"), buf)
	if !ok {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
		if v, ok := bytes.CutPrefix(line, []byte("Tgid:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			return n, err == nil && n > 0
		}
	}
	return 0, false
}

// exists reports whether the process behind our pidfd still holds its
// number: signal 0 checks existence only (EPERM still means it exists).
// A zombie exists; a reaped process does not.
func exists(pidfd int) bool {
	err := unix.PidfdSendSignal(pidfd, 0, nil, 0)
	return err == nil || err == unix.EPERM
}

// statOf reads the parent and process group of pid from /proc/<pid>/stat
// (parsed after the last ')', as comm may hold anything).
func statOf(pid int) (ppid, pgrp int, ok bool) {
	var buf [1024]byte
	b, ok := readSmall("/proc/"+strconv.Itoa(pid)+"/stat", buf[:])
	if !ok {
		return 0, 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(b[i+1:]) // state ppid pgrp ...
	if len(f) < 3 {
		return 0, 0, false
	}
	pp, err1 := strconv.Atoi(string(f[1]))
	pg, err2 := strconv.Atoi(string(f[2]))
	return pp, pg, err1 == nil && err2 == nil
}

// member reports whether the process behind our pidfd fd (thread group
// pid) is a strict descendant of the run's init.
//
// It walks the parent chain through /proc/<pid>/stat, holding a pidfd for
// each link. One step, from cur (pidfd held) to its parent number pp: read
// ppid(cur) = pp, open a pidfd for pp, read ppid(cur) again and require
// pp, then check cur still exists. cur existing throughout means both
// reads were about cur. A process's parent changes only when the parent
// exits, and the new parent (a subreaper ancestor or the namespace's init)
// was alive beside the old one, so it never has the old parent's number:
// the second read showing pp means cur's parent held pp from before the
// pidfd was opened until after, i.e. the pidfd names that parent. Being a
// descendant of init is for life and never gained later (orphans go to
// ancestors), so "the parent at some moment is a member" makes cur one.
// The walk ends at init's pid while init's pidfd shows it alive.
func (p *policy) member(fd, pid int) bool {
	if p.init == nil || pid <= 1 || pid == p.init.Pid {
		return false
	}
	cur, curFD := pid, fd
	defer func() {
		if curFD != fd {
			unix.Close(curFD)
		}
	}()
	for range maxDepth {
		pp, _, ok := statOf(cur)
		if !ok {
			return false
		}
		if pp == p.init.Pid {
			again, _, ok := statOf(cur)
			return ok && again == pp && exists(curFD) && exists(p.init.Pidfd)
		}
		if pp <= 1 {
			return false
		}
		ppFD, err := unix.PidfdOpen(pp, 0)
		if err != nil {
			return false
		}
		again, _, ok := statOf(cur)
		if !ok || again != pp || !exists(curFD) {
			unix.Close(ppFD)
			return false
		}
		if curFD != fd {
			unix.Close(curFD)
		}
		cur, curFD = pp, ppFD
	}
	return false
}
