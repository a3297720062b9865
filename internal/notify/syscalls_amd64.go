//go:build linux

package notify

import "golang.org/x/sys/unix"

const nativeArch = unix.AUDIT_ARCH_X86_64

var sysTable = map[int32]sysEntry{
	unix.SYS_CHMOD:         {"chmod", sysChmod},
	unix.SYS_FCHMOD:        {"fchmod", sysFchmod},
	unix.SYS_FCHMODAT:      {"fchmodat", sysFchmodat},
	unix.SYS_FCHMODAT2:     {"fchmodat2", sysFchmodat2},
	unix.SYS_CHOWN:         {"chown", sysChown},
	unix.SYS_LCHOWN:        {"lchown", sysLchown},
	unix.SYS_FCHOWN:        {"fchown", sysFchown},
	unix.SYS_FCHOWNAT:      {"fchownat", sysFchownat},
	unix.SYS_UTIME:         {"utime", sysUtime},
	unix.SYS_UTIMES:        {"utimes", sysUtimes},
	unix.SYS_FUTIMESAT:     {"futimesat", sysFutimesat},
	unix.SYS_UTIMENSAT:     {"utimensat", sysUtimensat},
	unix.SYS_SETXATTR:      {"setxattr", sysSetxattr},
	unix.SYS_LSETXATTR:     {"lsetxattr", sysLsetxattr},
	unix.SYS_FSETXATTR:     {"fsetxattr", sysFsetxattr},
	unix.SYS_SETXATTRAT:    {"setxattrat", sysSetxattrat},
	unix.SYS_REMOVEXATTR:   {"removexattr", sysRemovexattr},
	unix.SYS_LREMOVEXATTR:  {"lremovexattr", sysLremovexattr},
	unix.SYS_FREMOVEXATTR:  {"fremovexattr", sysFremovexattr},
	unix.SYS_REMOVEXATTRAT: {"removexattrat", sysRemovexattrat},
	unix.SYS_CONNECT:       {"connect", sysConnect},
	unix.SYS_CLONE:         {"clone", sysFork},
	unix.SYS_FORK:          {"fork", sysFork},
	unix.SYS_VFORK:         {"vfork", sysFork},
}
