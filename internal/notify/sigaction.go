//go:build linux

package notify

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// SA_RESTART for SIGCHLD handlers: why the filter sends
// rt_sigaction(SIGCHLD, act) here is in internal/seccomp/sigchld.go. In
// short, a signal that reaches a task before this supervisor has received
// its notification turns a decided fork or kill into EINTR when the
// handler lacks SA_RESTART, and SIGCHLD is the signal a forking process
// keeps getting.

// saRestart is SA_RESTART on amd64 and arm64 (asm-generic and x86 agree).
const saRestart = 0x10000000

// sigaction adds SA_RESTART to a SIGCHLD handler being installed, in the
// task's own struct sigaction, then lets the kernel run the call. The
// kernel reads the struct after this returns; a task that rewrites it
// meanwhile (another of its threads) only changes its own flags. Anything
// unexpected leaves the call as issued: the program then runs with the
// flags it asked for.
func (t *task) sigaction() result {
	as := t.n.Data.Args
	// struct kernel_sigaction starts with the handler and the flags, two
	// 64-bit words, on amd64 and arm64 alike.
	if int32(as[0]) != int32(unix.SIGCHLD) || as[1] == 0 || as[1] > 1<<63-16 {
		return result{cont: true}
	}
	var b [16]byte
	if t.mem.read(as[1], b[:]) != 0 {
		return result{cont: true} // the kernel reports EFAULT itself
	}
	handler := binary.NativeEndian.Uint64(b[:8])
	flags := binary.NativeEndian.Uint64(b[8:])
	// SIG_DFL (0) and SIG_IGN (1) run no handler.
	if handler <= 1 || flags&saRestart != 0 {
		return result{cont: true}
	}
	fd, err := unix.Open(procPath(t.tid, "mem"), unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return result{cont: true}
	}
	defer unix.Close(fd)
	// The descriptor is the notifying task's only if the notification is
	// still pending: the tid could otherwise name a new process. While it
	// is, the task waits for this answer and cannot be replaced.
	if !t.valid() {
		return result{cont: true}
	}
	binary.NativeEndian.PutUint64(b[8:], flags|saRestart)
	_, _ = unix.Pwrite(fd, b[8:], int64(as[1]+8))
	return result{cont: true}
}
