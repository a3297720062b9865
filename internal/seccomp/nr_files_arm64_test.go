//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// filesWant checks nr.go's arm64 numbers.
var filesWant = map[string]uint32{
	"mknodat": unix.SYS_MKNODAT, "linkat": unix.SYS_LINKAT, "renameat": unix.SYS_RENAMEAT,
	"truncate": unix.SYS_TRUNCATE, "openat": unix.SYS_OPENAT, "renameat2": unix.SYS_RENAMEAT2,
	"openat2": unix.SYS_OPENAT2, "mkdirat": unix.SYS_MKDIRAT, "symlinkat": unix.SYS_SYMLINKAT,
	"unlinkat": unix.SYS_UNLINKAT, "setgroups": unix.SYS_SETGROUPS,
}
