//go:build linux

package probe

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Vectors that act on another process by pid, process group, uid or
// pidfd, other than ptrace and process memory (proc.go). The harness
// checks each effect on the target itself.
func addProcTargetVectors(v map[string]vector) {
	v["prlimit"] = vector{"PID", 1, 1, vPrlimit}
	v["setaffinity"] = vector{"PID", 1, 1, vSetaffinity}
	v["setpriority"] = vector{"PID", 1, 1, vSetpriority}
	v["setpriority-user"] = vector{"UID", 1, 1, vSetpriorityUser}
	v["ioprio"] = vector{"PID", 1, 1, vIoprio}
	v["pidfd-signal"] = vector{"PID", 1, 1, vPidfdSignal}
	v["sigqueue"] = vector{"PID", 1, 1, vSigqueue}
	v["tgkill"] = vector{"PID", 1, 1, vTgkill}
	v["kill-group"] = vector{"PGID", 1, 1, vKillGroup}
	v["fcntl-setown"] = vector{"PID", 1, 1, vFcntlSetown}
}

// probeNofile is the soft RLIMIT_NOFILE vPrlimit gives its target.
const probeNofile = 77

// vPrlimit lowers the target's soft RLIMIT_NOFILE to 77 (enough to make a
// server fail; RLIMIT_CPU would kill it).
func vPrlimit(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
		return blocked("prlimit(get)", err)
	}
	lim := unix.Rlimit{Cur: probeNofile, Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, &lim, nil); err != nil {
		return blocked("prlimit(RLIMIT_NOFILE)", err)
	}
	return escaped("prlimit(%d, RLIMIT_NOFILE, {%d, %d}) succeeded", pid, lim.Cur, lim.Max)
}

// vSetaffinity pins the target to the first CPU it may run on.
func vSetaffinity(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	var cur unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &cur); err != nil {
		return blocked("sched_getaffinity", err)
	}
	if cur.Count() < 2 {
		return na("the target may run on %d CPU(s); pinning it changes nothing", cur.Count())
	}
	var one unix.CPUSet
	for c := 0; c < len(cur)*64; c++ {
		if cur.IsSet(c) {
			one.Set(c)
			break
		}
	}
	if err := unix.SchedSetaffinity(pid, &one); err != nil {
		return blocked("sched_setaffinity", err)
	}
	return escaped("sched_setaffinity(%d) pinned it to one CPU", pid)
}

// vSetpriority renices the target to 19.
func vSetpriority(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	if err := unix.Setpriority(unix.PRIO_PROCESS, pid, 19); err != nil {
		return blocked("setpriority(PRIO_PROCESS)", err)
	}
	return escaped("setpriority(PRIO_PROCESS, %d, 19) succeeded", pid)
}

// vSetpriorityUser renices every process of uid UID to 1.
func vSetpriorityUser(args []string) result {
	uid, bad := parseUint(args[0], "uid", 32)
	if bad != nil {
		return *bad
	}
	if err := unix.Setpriority(unix.PRIO_USER, int(uid), 1); err != nil {
		return blocked("setpriority(PRIO_USER)", err)
	}
	return escaped("setpriority(PRIO_USER, %d, 1) succeeded", uid)
}

// ioprioIdle is IOPRIO_PRIO_VALUE(IOPRIO_CLASS_IDLE, 0).
const ioprioIdle = 3 << 13

// vIoprio moves the target to the idle I/O class.
func vIoprio(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	const whoProcess = 1
	if _, _, e := unix.Syscall(unix.SYS_IOPRIO_SET, whoProcess, uintptr(pid), ioprioIdle); e != 0 {
		return blocked("ioprio_set(IOPRIO_WHO_PROCESS)", e)
	}
	return escaped("ioprio_set(IOPRIO_WHO_PROCESS, %d, idle) succeeded", pid)
}

func vPidfdSignal(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return blocked("pidfd_open", err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGUSR1, nil, 0); err != nil {
		return blocked("pidfd_send_signal(SIGUSR1)", err)
	}
	return escaped("pidfd_send_signal(pidfd of %d, SIGUSR1) succeeded", pid)
}

// vSigqueue is sigqueue(3): rt_sigqueueinfo with SI_QUEUE.
func vSigqueue(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	var info [128]byte
	si := (*unix.Siginfo)(unsafe.Pointer(&info[0]))
	si.Signo = int32(unix.SIGUSR1)
	si.Code = -1 // SI_QUEUE
	if _, _, e := unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(unix.SIGUSR1), uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return blocked("rt_sigqueueinfo(SIGUSR1)", e)
	}
	return escaped("rt_sigqueueinfo(%d, SIGUSR1) succeeded", pid)
}

func vTgkill(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	if err := unix.Tgkill(pid, pid, unix.SIGUSR1); err != nil {
		return blocked("tgkill(SIGUSR1)", err)
	}
	return escaped("tgkill(%d, %d, SIGUSR1) succeeded", pid, pid)
}

func vKillGroup(args []string) result {
	pgid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	if err := unix.Kill(-pgid, unix.SIGUSR1); err != nil {
		return blocked("kill(-pgid, SIGUSR1)", err)
	}
	return escaped("kill(-%d, SIGUSR1) succeeded", pgid)
}

// vFcntlSetown makes the target the owner of a pipe's read end with
// O_ASYNC, then writes to the pipe: the kernel sends it SIGIO, whose default
// action ends it. A sandbox may refuse F_SETOWN or drop the SIGIO; only
// the harness, looking at the target, can tell.
func vFcntlSetown(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return blocked("pipe2", err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETOWN, pid); err != nil {
		return blocked("fcntl(F_SETOWN)", err)
	}
	fl, err := unix.FcntlInt(uintptr(p[0]), unix.F_GETFL, 0)
	if err != nil {
		return blocked("fcntl(F_GETFL)", err)
	}
	if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFL, fl|unix.O_ASYNC); err != nil {
		return blocked("fcntl(F_SETFL, O_ASYNC)", err)
	}
	if _, err := unix.Write(p[1], []byte("x")); err != nil {
		return blocked("write", err)
	}
	return escaped("F_SETOWN(%d) with O_ASYNC accepted; wrote to the pipe", pid)
}
