//go:build linux

package notify

import "golang.org/x/sys/unix"

// fileSysTable lists the calls of files.go (merged into sysTable).
var fileSysTable = map[int32]sysEntry{
	unix.SYS_TRUNCATE:  {"truncate", sysTruncate},
	unix.SYS_RENAME:    {"rename", sysRename},
	unix.SYS_RENAMEAT:  {"renameat", sysRenameat},
	unix.SYS_RENAMEAT2: {"renameat2", sysRenameat2},
	unix.SYS_LINK:      {"link", sysLink},
	unix.SYS_LINKAT:    {"linkat", sysLinkat},
}
