//go:build linux

package notify

import (
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// newerKinds are calls the launcher performs for the task that a kernel
// it runs on may predate: fchmodat2 (Linux 6.6), setxattrat and
// removexattrat (6.13). The filter sends them here whatever the kernel
// has, and performing them would make them work where the task, alone,
// would have been told the call does not exist.
var newerKinds = []sysKind{sysFchmodat2, sysSetxattrat, sysRemovexattrat}

// refusedByKernel maps each of newerKinds that this kernel (or the
// seccomp profile of a container the launcher runs in) refuses to the
// errno it answers, so that the task gets the same. Probed once, with a
// descriptor of -1 and null pointers: a kernel that has the call fails
// it with EBADF, EFAULT or EINVAL, and changes nothing.
var refusedByKernel = sync.OnceValue(func() map[sysKind]unix.Errno {
	m := map[sysKind]unix.Errno{}
	for nr, e := range sysTable {
		if !slices.Contains(newerKinds, e.kind) {
			continue
		}
		if _, _, en := unix.Syscall6(uintptr(nr), ^uintptr(0), 0, 0, 0, 0, 0); en == unix.ENOSYS || en == unix.EPERM {
			m[e.kind] = en
		}
	}
	return m
})
