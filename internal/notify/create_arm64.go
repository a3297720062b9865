//go:build linux

package notify

import "golang.org/x/sys/unix"

// createSysTable lists the calls of create.go (merged into sysTable);
// arm64 has only the *at forms.
var createSysTable = map[int32]sysEntry{
	unix.SYS_MKDIRAT:   {"mkdirat", sysMkdirat},
	unix.SYS_SYMLINKAT: {"symlinkat", sysSymlinkat},
	unix.SYS_MKNODAT:   {"mknodat", sysMknodat},
	unix.SYS_OPENAT:    {"openat", sysOpenat},
	unix.SYS_UNLINKAT:  {"unlinkat", sysUnlinkat},
	unix.SYS_SETGROUPS: {"setgroups", sysSetgroups},
}
