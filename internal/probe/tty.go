//go:build linux

package probe

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// tioclPasteSel is TIOCL_PASTESEL, the TIOCLINUX sub-command that pastes the
// console selection into the terminal's input.
const tioclPasteSel = 3

// openTTY opens a terminal without making it the controlling one.
func openTTY(path string) (int, error) {
	fd, err := openRetry(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		// The ioctls need only some descriptor of the terminal.
		if fd2, err2 := openRetry(path, unix.O_RDONLY|unix.O_NOCTTY|unix.O_CLOEXEC, 0); err2 == nil {
			return fd2, nil
		}
	}
	return fd, err
}

// tiocsti pushes 'x' into the input queue of the terminal at path with the
// ioctl request cmd (TIOCSTI, possibly with high bits set that the kernel
// ignores but a seccomp argument filter may compare).
func tiocsti(path string, cmd uint64) result {
	fd, err := openTTY(path)
	if err != nil {
		return blocked("open "+path, err)
	}
	defer unix.Close(fd)
	c := byte('x')
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(cmd), uintptr(unsafe.Pointer(&c)))
	name := fmt.Sprintf("ioctl(%#x TIOCSTI)", cmd)
	if e != 0 {
		return blocked(name, e)
	}
	return escaped("%s injected 'x' into %s", name, path)
}

func vTIOCSTI(args []string) result {
	return tiocsti(args[0], unix.TIOCSTI)
}

func vTIOCSTIHi(args []string) result {
	return tiocsti(args[0], unix.TIOCSTI|1<<32)
}

// vTIOCLINUX asks the terminal to paste the console selection into its own
// input (the classic TIOCLINUX injection). Only virtual consoles implement
// TIOCLINUX; other terminals answer ENOTTY/EINVAL, reported as n/a.
func vTIOCLINUX(args []string) result {
	path := args[0]
	fd, err := openTTY(path)
	if err != nil {
		return blocked("open "+path, err)
	}
	defer unix.Close(fd)
	sub := byte(tioclPasteSel)
	_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
	if e == unix.ENOTTY || e == unix.EINVAL {
		return na("ioctl(TIOCLINUX, TIOCL_PASTESEL) on %s: %s (not a virtual console)", path, errString(e))
	}
	if e != 0 {
		return blocked("ioctl(TIOCLINUX, TIOCL_PASTESEL)", e)
	}
	return escaped("ioctl(TIOCLINUX, TIOCL_PASTESEL) on %s succeeded", path)
}
