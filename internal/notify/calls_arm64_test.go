//go:build linux

package notify

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// arm64 has only the *at forms of the path calls. The tables' chmod, chown,
// lchown, rename and link rows run as the *at call a C library makes for
// them here (dirfd AT_FDCWD), so the same expectations hold and the
// supervisor sees the *at call; utime, utimes and futimesat have no such
// one-to-one form (their time structures differ) and are skipped, saying
// why: the utimensat rows cover the only time call arm64 has.

// archAbsent lists the handled calls this architecture does not have, with
// why their rows do not run.
var archAbsent = map[string]string{
	"utime":     "arm64 has no utime(2); a C library calls utimensat, which the utimensat rows cover",
	"utimes":    "arm64 has no utimes(2); a C library calls utimensat, which the utimensat rows cover",
	"futimesat": "arm64 has no futimesat(2); a C library calls utimensat, which the utimensat rows cover",
}

// atForm is the call arm64 makes for each legacy call the tables name.
var atForm = map[string]string{
	"chmod":  "fchmodat",
	"chown":  "fchownat",
	"lchown": "fchownat",
	"rename": "renameat",
	"link":   "linkat",
}

// archLacks lists the calls of TestSyscalls' table this architecture does
// not have, so the supervisor has no handler for them here.
var archLacks = []string{"chmod", "chown", "futimesat", "lchown", "link", "rename", "utime", "utimes", "fork", "vfork"}

// nativeCall names the call the kernel sees when the probe makes call.
func nativeCall(call string) string {
	if at, ok := atForm[call]; ok {
		return at
	}
	return call
}

// legacyCall makes the *at form of a call older than it (see atForm).
func legacyCall(call string, sys func(uintptr, ...uintptr) unix.Errno, _ uintptr, path, alt []byte, mode, owner, group, _ uintptr) unix.Errno {
	cwd := uintptr(cwdFD)
	defer runtime.KeepAlive(alt) // a uintptr does not keep it alive
	switch call {
	case "chmod":
		return sys(unix.SYS_FCHMODAT, cwd, ptr(path), mode)
	case "chown":
		return sys(unix.SYS_FCHOWNAT, cwd, ptr(path), owner, group, 0)
	case "lchown":
		return sys(unix.SYS_FCHOWNAT, cwd, ptr(path), owner, group, unix.AT_SYMLINK_NOFOLLOW)
	case "rename":
		return sys(unix.SYS_RENAMEAT, cwd, ptr(path), cwd, ptr(alt))
	case "link":
		return sys(unix.SYS_LINKAT, cwd, ptr(path), cwd, ptr(alt), 0)
	}
	return unix.ENOSYS
}

// chmodRaw is the races' attacked call: chmod(path, mode) as arm64 makes
// it, fchmodat(AT_FDCWD, path, mode).
func chmodRaw(path []byte, mode uint32) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_FCHMODAT, uintptr(cwdFD), ptr(path), uintptr(mode))
	runtime.KeepAlive(path)
	return e
}
