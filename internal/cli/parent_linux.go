package cli

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// pidfdWaiter waits for a process to exit on a pidfd (readable at exit),
// or for stop, signalled through an eventfd.
type pidfdWaiter struct{ pidfd, stopfd int }

// parentWaiter opens a pidfd of ppid, the caller's parent: a pidfd names
// that process for good, even once its number is reused. Where a seccomp
// profile refuses pidfd_open (EPERM, or ENOSYS: Docker's before 20.10,
// which predate it), it polls the parent instead, as on macOS.
func parentWaiter(ppid int) (parentWatch, error) {
	pfd, err := unix.PidfdOpen(ppid, 0)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOSYS) {
		return newPollWaiter(ppid, fmt.Sprintf("pidfd_open refused: %v", err)), nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open(%d): %w", ppid, err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(pfd)
		return nil, fmt.Errorf("eventfd: %w", err)
	}
	return &pidfdWaiter{pidfd: pfd, stopfd: efd}, nil
}

func (w *pidfdWaiter) String() string { return "through a pidfd" }

// wait blocks until the process exits (true) or stop is called (false).
func (w *pidfdWaiter) wait() bool {
	fds := []unix.PollFd{{Fd: int32(w.pidfd), Events: unix.POLLIN}, {Fd: int32(w.stopfd), Events: unix.POLLIN}}
	for {
		if _, err := unix.Poll(fds, -1); err == unix.EINTR {
			continue
		} else if err != nil {
			// Cannot watch any more: keep the run going rather than end
			// it for a reason that is not the parent's exit.
			return false
		}
		if fds[1].Revents != 0 {
			return false
		}
		if fds[0].Revents != 0 {
			return true
		}
	}
}

// stop ends a wait, or makes the next one return at once.
func (w *pidfdWaiter) stop() {
	var one [8]byte
	binary.NativeEndian.PutUint64(one[:], 1)
	_, _ = unix.Write(w.stopfd, one[:])
}

// release closes the descriptors, once no wait is running.
func (w *pidfdWaiter) release() {
	unix.Close(w.pidfd)
	unix.Close(w.stopfd)
}
