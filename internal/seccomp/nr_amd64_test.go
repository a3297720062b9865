//go:build linux

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The hand-written amd64 numbers must agree with x/sys/unix, which is
// generated from the kernel headers for this GOARCH.
func TestNumbersMatchUnix(t *testing.T) {
	checkTable(t, "amd64Nr", amd64Nr, with(sharedWant, map[string]uint32{
		"fork": unix.SYS_FORK, "vfork": unix.SYS_VFORK, "chmod": unix.SYS_CHMOD, "chown": unix.SYS_CHOWN,
		"lchown": unix.SYS_LCHOWN, "utime": unix.SYS_UTIME, "uselib": unix.SYS_USELIB,
		"modify_ldt": unix.SYS_MODIFY_LDT, "iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM,
		"utimes": unix.SYS_UTIMES, "futimesat": unix.SYS_FUTIMESAT, "open": unix.SYS_OPEN,
		"creat": unix.SYS_CREAT, "link": unix.SYS_LINK, "rename": unix.SYS_RENAME,
		"mknod": unix.SYS_MKNOD, "mkdir": unix.SYS_MKDIR, "symlink": unix.SYS_SYMLINK,
		"unlink": unix.SYS_UNLINK, "rmdir": unix.SYS_RMDIR,
	}))
	checkTable(t, "commonAMD64", commonAMD64, with(sharedCommonWant, map[string]uint32{
		"fork": unix.SYS_FORK, "vfork": unix.SYS_VFORK,
	}))
}
