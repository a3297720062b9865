//go:build linux

package notify

import "golang.org/x/sys/unix"

// createSysTable lists the calls of create.go (merged into sysTable).
var createSysTable = map[int32]sysEntry{
	unix.SYS_MKDIR:     {"mkdir", sysMkdir},
	unix.SYS_MKDIRAT:   {"mkdirat", sysMkdirat},
	unix.SYS_SYMLINK:   {"symlink", sysSymlink},
	unix.SYS_SYMLINKAT: {"symlinkat", sysSymlinkat},
	unix.SYS_MKNOD:     {"mknod", sysMknod},
	unix.SYS_MKNODAT:   {"mknodat", sysMknodat},
	unix.SYS_OPEN:      {"open", sysOpen},
	unix.SYS_OPENAT:    {"openat", sysOpenat},
	unix.SYS_CREAT:     {"creat", sysCreat},
	unix.SYS_UNLINK:    {"unlink", sysUnlink},
	unix.SYS_UNLINKAT:  {"unlinkat", sysUnlinkat},
	unix.SYS_RMDIR:     {"rmdir", sysRmdir},
	unix.SYS_SETGROUPS: {"setgroups", sysSetgroups},
}
