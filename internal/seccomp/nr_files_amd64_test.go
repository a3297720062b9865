//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// filesWant checks nr.go's amd64 numbers.
var filesWant = map[string]uint32{
	"open": unix.SYS_OPEN, "creat": unix.SYS_CREAT, "link": unix.SYS_LINK, "rename": unix.SYS_RENAME,
	"truncate": unix.SYS_TRUNCATE, "mknod": unix.SYS_MKNOD, "openat": unix.SYS_OPENAT,
	"mknodat": unix.SYS_MKNODAT, "renameat": unix.SYS_RENAMEAT, "linkat": unix.SYS_LINKAT,
	"renameat2": unix.SYS_RENAMEAT2, "openat2": unix.SYS_OPENAT2,
	"mkdir": unix.SYS_MKDIR, "symlink": unix.SYS_SYMLINK, "mkdirat": unix.SYS_MKDIRAT, "symlinkat": unix.SYS_SYMLINKAT,
	"unlink": unix.SYS_UNLINK, "rmdir": unix.SYS_RMDIR, "unlinkat": unix.SYS_UNLINKAT,
	"setgroups": unix.SYS_SETGROUPS,
}
