//go:build linux

package seccomp

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Install loads prog as a seccomp filter on the calling thread only: no
// SECCOMP_FILTER_FLAG_TSYNC, because the caller is a locked OS thread about
// to execve, and the filter must not reach the other threads of the Go
// runtime that launches the command. no_new_privs must already be set.
//
// With listener set it passes SECCOMP_FILTER_FLAG_NEW_LISTENER and returns
// the user-notification fd (close-on-exec, as the kernel creates it), which
// the caller must hand to the supervisor before execve; otherwise it returns
// -1. A filter built with plan.Seccomp.NotifyMetadata or plan.Seccomp.NotifyConnect
// needs a listener, or the notified calls fail with ENOSYS.
func Install(prog []bpf.RawInstruction, listener bool) (notifyFD int, err error) {
	if len(prog) == 0 || len(prog) > maxInsns {
		return -1, fmt.Errorf("seccomp: filter length %d out of range 1..%d", len(prog), maxInsns)
	}
	// The kernel would refuse with EACCES anyway unless the caller holds
	// CAP_SYS_ADMIN; refusing here also keeps a privileged caller from
	// installing a filter that a setuid binary could then run under.
	nnp, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0, 0)
	if e != 0 {
		return -1, fmt.Errorf("seccomp: prctl(PR_GET_NO_NEW_PRIVS): %w", e)
	}
	if nnp != 1 {
		return -1, errors.New("seccomp: no_new_privs is not set")
	}
	// bpf.RawInstruction has the layout of struct sock_filter.
	fprog := unix.SockFprog{
		Len:    uint16(len(prog)),
		Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0])),
	}
	var flags uintptr
	if listener {
		// WAIT_KILLABLE_RECV (5.19+): once the supervisor has a
		// notification, non-fatal signals (Go's SIGURG preemption, every
		// 10ms) no longer restart the call and void the supervisor's work.
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
	}
	r, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	if e == unix.EINVAL && listener {
		// Older kernel: the flag only makes notified calls cheaper.
		flags = unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
		r, _, e = unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&fprog)))
	}
	if e != 0 {
		return -1, fmt.Errorf("seccomp: seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	if !listener {
		return -1, nil
	}
	return int(r), nil
}

// Probe reports whether the kernel supports what the sandbox needs:
// seccomp filter mode with SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_ERRNO and
// SECCOMP_RET_USER_NOTIF (Linux 5.0+). It installs nothing.
func Probe() error {
	// SECCOMP_GET_ACTION_AVAIL fails with EOPNOTSUPP for an unknown
	// action and EINVAL/ENOSYS where seccomp() or filters are missing.
	for _, act := range []struct {
		name string
		val  uint32
	}{
		{"SECCOMP_RET_KILL_PROCESS", unix.SECCOMP_RET_KILL_PROCESS},
		{"SECCOMP_RET_ERRNO", unix.SECCOMP_RET_ERRNO},
		{"SECCOMP_RET_USER_NOTIF", unix.SECCOMP_RET_USER_NOTIF},
	} {
		v := act.val
		_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&v)))
		if e != 0 {
			return fmt.Errorf("seccomp: %s not available: %w", act.name, e)
		}
	}
	// The notification structures a supervisor exchanges with the kernel
	// must be at least the sizes this package's users were written for.
	var sizes struct {
		notif, resp, data uint16
	}
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&sizes)))
	if e != 0 {
		return fmt.Errorf("seccomp: SECCOMP_GET_NOTIF_SIZES: %w", e)
	}
	if sizes.data < 64 || sizes.notif < 80 || sizes.resp < 24 {
		return fmt.Errorf("seccomp: unexpected notification sizes notif=%d resp=%d data=%d", sizes.notif, sizes.resp, sizes.data)
	}
	return nil
}

var listenerFlags = sync.OnceValue(func() uintptr {
	flags := uintptr(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER | unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV)
	// The kernel checks the flags before it reads the program: EFAULT on
	// a nil program means it knows them, and installs nothing.
	_, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, 0)
	if e == unix.EINVAL {
		return unix.SECCOMP_FILTER_FLAG_NEW_LISTENER
	}
	return flags
})

// ListenerFlags are the seccomp(SECCOMP_SET_MODE_FILTER) flags Install
// uses for a filter with a listener on this kernel, for a caller that
// installs a prepared program itself.
func ListenerFlags() uintptr { return listenerFlags() }
