//go:build linux

package notify

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Kernel ABI of the seccomp user-notification interface (linux/seccomp.h).
// golang.org/x/sys/unix has the ioctl numbers for RECV and SEND but neither the
// structures nor SECCOMP_IOCTL_NOTIF_ID_VALID.

const (
	ioctlNotifRecv = unix.SECCOMP_IOCTL_NOTIF_RECV
	ioctlNotifSend = unix.SECCOMP_IOCTL_NOTIF_SEND
	// SECCOMP_IOCTL_NOTIF_ID_VALID is _IOW('!', 2, __u64) since Linux 5.17;
	// earlier kernels only know the mis-encoded _IOR value, which current
	// kernels still accept.
	ioctlNotifIDValid    = 0x40082102
	ioctlNotifIDValidOld = 0x80082102
	// SECCOMP_IOCTL_NOTIF_SET_FLAGS is _IOW('!', 4, __u64), Linux 6.6.
	ioctlNotifSetFlags = 0x40082104
)

// syncWakeUp asks the kernel to hand each notification to the supervisor,
// and each answer back to the task, on the waker's CPU
// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): a round trip then costs
// two context switches and no trip through the run queues, which is what
// every notified fork pays. Older kernels refuse it (EINVAL/ENOTTY); the
// notifications work the same, only slower.
func syncWakeUp(listener int) {
	flags := uint64(unix.SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP)
	_, _, _ = unix.Syscall(unix.SYS_IOCTL, uintptr(listener), ioctlNotifSetFlags, uintptr(flags))
}

// seccompData mirrors struct seccomp_data.
type seccompData struct {
	Nr   int32
	Arch uint32
	IP   uint64
	Args [6]uint64
}

// seccompNotif mirrors struct seccomp_notif.
type seccompNotif struct {
	ID    uint64
	PID   uint32
	Flags uint32
	Data  seccompData
}

// seccompNotifResp mirrors struct seccomp_notif_resp.
type seccompNotifResp struct {
	ID    uint64
	Val   int64
	Error int32
	Flags uint32
}

// seccompNotifSizes mirrors struct seccomp_notif_sizes.
type seccompNotifSizes struct {
	Notif uint16
	Resp  uint16
	Data  uint16
}

// notifSizes asks the kernel how large the notification structures are, so
// that buffers stay large enough if a future kernel extends them.
func notifSizes() (seccompNotifSizes, error) {
	var s seccompNotifSizes
	_, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_NOTIF_SIZES, 0, uintptr(unsafe.Pointer(&s)))
	if e != 0 {
		return s, e
	}
	return s, nil
}

// alignedBuf returns a zeroed, 8-byte aligned buffer of at least n bytes
// (and at least min bytes).
func alignedBuf(n, min int) []uint64 {
	if n < min {
		n = min
	}
	return make([]uint64, (n+7)/8)
}

func ioctlPtr(fd int, req uintptr, p unsafe.Pointer) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(p))
	return e
}

// idValid reports whether notification id is still pending, i.e. the task
// that raised it is still blocked in that very system call. Checking this
// after /proc/PID has been opened proves the PID was not recycled.
func idValid(listener int, id uint64) bool {
	e := ioctlPtr(listener, ioctlNotifIDValid, unsafe.Pointer(&id))
	if e == unix.EINVAL || e == unix.ENOTTY {
		e = ioctlPtr(listener, ioctlNotifIDValidOld, unsafe.Pointer(&id))
	}
	return e == 0
}

// addFD is SECCOMP_IOCTL_NOTIF_ADDFD with every signal blocked on the
// calling (locked) thread. With SECCOMP_ADDFD_FLAG_SEND the kernel marks
// the notification answered before it waits for the task to take the
// descriptor; a signal in that wait (the Go runtime's preemption signal,
// SIGURG, is frequent) makes the ioctl return ERESTARTSYS, the kernel
// withdraws the descriptor, and the restarted ioctl fails with
// EINPROGRESS, while the task's call returns 0, a descriptor it never
// opened. That was the "openat with an empty path" of issue 22: a build
// writing into its stdin. Blocked, the signal waits for the ioctl.
func addFD(listener int, add *seccompNotifAddfd) (uintptr, unix.Errno) {
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return 0, errnoOf(err)
	}
	defer func() { _ = unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil) }()
	v, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(listener), unix.SECCOMP_IOCTL_NOTIF_ADDFD, uintptr(unsafe.Pointer(add)))
	return v, e
}
