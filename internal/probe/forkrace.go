//go:build linux

package probe

import (
	"encoding/binary"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fork-race MAX [WORKERS]: WORKERS processes (default 4) fork at once,
// each up to its share of MAX children that block, until a fork fails.
// The forking runs outside the Go runtime (a raw clone, raw system calls
// only), so that a limit reached halfway cannot take the probe down with
// it. Nothing exits while it runs, so the children, the forking processes
// and the probe's threads, counted at the end, are the most tasks the run
// held. Escaped when that exceeds MAX, which a sandbox enforcing
// --max-procs MAX must prevent; the control, unbounded, makes MAX
// children (its cap, so it is no real bomb).
func vForkRace(args []string) result {
	limit, err := strconv.Atoi(args[0])
	if err != nil || limit < 1 || limit > 100000 {
		return usage("bad MAX %q", args[0])
	}
	workers := 4
	if len(args) > 1 {
		if workers, err = strconv.Atoi(args[1]); err != nil || workers < 1 || workers > 64 {
			return usage("bad WORKERS %q", args[1])
		}
	}
	// Once the forks fill the run, the Go runtime must not need another
	// thread: a failed thread creation is fatal and the probe would die
	// without reporting (it did under the fork count, in CI). A thread is
	// made when a goroutine becomes runnable (the scavenger, the
	// GOMAXPROCS updater) while the only P was handed off from a system
	// call that took a while, however short the call is meant to be. So:
	// one P, no collector, and every system call from the first fork on
	// is raw (it keeps the P).
	runtime.GOMAXPROCS(1)
	debug.SetGCPercent(-1)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return blocked("become a subreaper", err)
	}
	// Not locked to its thread: preempted (sysmon preempts a goroutine
	// after 10 ms, a long raw read included), a locked goroutine hands
	// its P to a new thread; an unlocked one is rescheduled on its own.
	var gate, rep [2]int
	if err := unix.Pipe2(gate[:], unix.O_CLOEXEC); err != nil {
		return blocked("pipe", err)
	}
	if err := unix.Pipe2(rep[:], unix.O_CLOEXEC); err != nil {
		return blocked("pipe", err)
	}
	share := (limit + workers - 1) / workers
	var pids []int
	var first unix.Errno
	for range workers {
		pid, e := RawFork(gate[0], rep[1], share)
		if e != 0 {
			first = e
			break
		}
		pids = append(pids, pid)
	}
	defer func() {
		for _, p := range pids {
			syscall.RawSyscall(syscall.SYS_KILL, uintptr(p), uintptr(syscall.SIGKILL), 0)
		}
		// The children die with their forking process and, this being a
		// subreaper, come back here to be reaped: none is left to count
		// against the uid's RLIMIT_NPROC in the next run.
		for {
			_, _, e := syscall.RawSyscall6(syscall.SYS_WAIT4, ^uintptr(0), 0, unix.WALL, 0, 0, 0)
			if e == unix.ECHILD {
				break
			}
		}
	}()
	go1 := make([]byte, len(pids)+1)
	if _, _, e := syscall.RawSyscall(syscall.SYS_WRITE, uintptr(gate[1]), uintptr(unsafe.Pointer(&go1[0])), uintptr(len(pids))); e != 0 {
		return blocked("start the forking processes", e)
	}
	children := 0
	b := make([]byte, 16)
	for range pids {
		for got := 0; got < len(b); {
			n, _, e := syscall.RawSyscall(syscall.SYS_READ, uintptr(rep[0]), uintptr(unsafe.Pointer(&b[got])), uintptr(len(b)-got))
			if e == unix.EINTR {
				continue
			}
			if e != 0 || n == 0 {
				return blockedf("a forking process died without reporting (%v)", e)
			}
			got += int(n)
		}
		children += int(binary.LittleEndian.Uint64(b))
		if e := unix.Errno(binary.LittleEndian.Uint64(b[8:])); e != 0 && first == 0 {
			first = e
		}
	}
	threads := ownThreads()
	total := children + len(pids) + threads
	what := strconv.Itoa(total) + " tasks (" + strconv.Itoa(children) + " children, " + strconv.Itoa(len(pids)) +
		" forking processes, " + strconv.Itoa(threads) + " threads of the probe)"
	if total > limit {
		return escaped("the run held %s, more than %d", what, limit)
	}
	if first == 0 {
		return blockedf("held %s, no more than %d, without a refusal (too few workers?)", what, limit)
	}
	return blockedf("fork refused with %s at %s, no more than %d", errString(first), what, limit)
}

// ownThreads counts the probe's threads: from /proc/self/status, or, where
// the sandbox hides it, the threads the Go runtime made (none exits here:
// no goroutine ends while locked to its thread).
func ownThreads() int {
	b, ok := rawReadFile("/proc/self/status")
	if !ok {
		return pprof.Lookup("threadcreate").Count()
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// rawReadFile reads a small file with raw system calls: while they run,
// the goroutine keeps its P, so the runtime never starts a thread to run
// something else meanwhile (which, the run being full, would be fatal).
func rawReadFile(path string) ([]byte, bool) {
	p, err := unix.BytePtrFromString(path)
	if err != nil {
		return nil, false
	}
	cwd := unix.AT_FDCWD
	fd, _, e := syscall.RawSyscall6(syscall.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), syscall.O_RDONLY|syscall.O_CLOEXEC, 0, 0, 0)
	if e != 0 {
		return nil, false
	}
	defer syscall.RawSyscall(syscall.SYS_CLOSE, fd, 0, 0)
	b := make([]byte, 0, 4096)
	for len(b) < cap(b) {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&b[len(b):cap(b)][0])), uintptr(cap(b)-len(b)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return nil, false
		}
		if n == 0 {
			return b, true
		}
		b = b[:len(b)+int(n)]
	}
	return b, true
}

// RawFork starts, in a child made by a raw clone (outside the Go
// runtime, so that a limit reached halfway cannot abort it), a forking
// process. It dies with the caller. It waits for one byte on gate, forks
// up to limit children that block forever (each dies with it), writes to
// report 16 bytes, the children it made and the errno that stopped it
// (two little-endian uint64), and blocks forever itself. It returns the
// forking process's pid, or the errno of the clone. notify's fork tests
// use it too.
//
//go:nosplit
func RawFork(gate, report, limit int) (int, unix.Errno) {
	self, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, unix.Errno(e)
	}
	if r == 0 {
		raceForker(self, gate, report, limit)
	}
	return int(r), 0
}

// raceForker runs where the Go runtime must not be touched (nosplit, raw
// system calls): it waits for the go-ahead, forks up to limit children
// that block forever, reports how many and the error that stopped it, and
// blocks forever itself. Each dies with its parent.
//
//go:nosplit
func raceForker(parent uintptr, gate, report, limit int) {
	var b [16]byte
	raceDieWith(parent)
	self, _, _ := syscall.RawSyscall(syscall.SYS_GETPID, 0, 0, 0)
	syscall.RawSyscall(syscall.SYS_READ, uintptr(gate), uintptr(unsafe.Pointer(&b[0])), 1)
	n, errno := 0, uintptr(0)
	for n < limit {
		r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
		if e != 0 {
			errno = uintptr(e)
			break
		}
		if r == 0 {
			raceDieWith(self)
			for {
				syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
			}
		}
		n++
	}
	*(*uint64)(unsafe.Pointer(&b[0])) = uint64(n)
	*(*uint64)(unsafe.Pointer(&b[8])) = uint64(errno)
	syscall.RawSyscall(syscall.SYS_WRITE, uintptr(report), uintptr(unsafe.Pointer(&b[0])), 16)
	for {
		syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
	}
}

// raceDieWith: SIGKILL when the parent dies, or exit at once if it is
// already gone.
//
//go:nosplit
func raceDieWith(parent uintptr) {
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	if pp, _, _ := syscall.RawSyscall(syscall.SYS_GETPPID, 0, 0, 0); pp != parent {
		syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 1, 0, 0)
	}
}
