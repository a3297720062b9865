//go:build linux

package notify

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// amd64 has every call the tables name: each runs as itself.

// archAbsent lists the handled calls this architecture does not have.
var archAbsent = map[string]string{}

// archLacks lists the calls of TestSyscalls' table this architecture does
// not have (none).
var archLacks []string

// nativeCall names the call the kernel sees when the probe makes call.
func nativeCall(call string) string { return call }

// legacyCall makes one of the calls older than their *at forms (chmod,
// chown, lchown, utime, utimes, futimesat, rename, link).
func legacyCall(call string, sys func(uintptr, ...uintptr) unix.Errno, d uintptr, path, alt []byte, mode, owner, group, times uintptr) unix.Errno {
	defer runtime.KeepAlive(alt) // a uintptr does not keep it alive
	switch call {
	case "chmod":
		return sys(unix.SYS_CHMOD, ptr(path), mode)
	case "chown":
		return sys(unix.SYS_CHOWN, ptr(path), owner, group)
	case "lchown":
		return sys(unix.SYS_LCHOWN, ptr(path), owner, group)
	case "utime":
		return sys(unix.SYS_UTIME, ptr(path), times)
	case "utimes":
		return sys(unix.SYS_UTIMES, ptr(path), times)
	case "futimesat":
		return sys(unix.SYS_FUTIMESAT, d, ptr(path), times)
	case "rename":
		return sys(unix.SYS_RENAME, ptr(path), ptr(alt))
	case "link":
		return sys(unix.SYS_LINK, ptr(path), ptr(alt))
	}
	return unix.ENOSYS
}

// chmodRaw is the races' attacked call: chmod(path, mode).
func chmodRaw(path []byte, mode uint32) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_CHMOD, ptr(path), uintptr(mode), 0)
	runtime.KeepAlive(path)
	return e
}
