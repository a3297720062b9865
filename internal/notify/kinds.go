//go:build linux

package notify

import "github.com/confine-sandbox/confine/internal/seccomp"

// sysKind identifies a handled system call independently of its number
// (sysCalls names the calls of each kind; sysTable maps the native
// architecture's numbers to them). Kinds live only in
// memory: nothing persists them.
type sysKind int

// Every kind, in this one block and numbered by iota alone, so that no two
// can share a value (they did twice when each file numbered its own from
// an offset). The groups are contiguous: isProcKind and isFileKind test
// ranges. kinds_test.go checks that no kind is declared elsewhere.
const (
	// Metadata calls decoded and checked against the write roots
	// (handle.go).
	sysChmod sysKind = iota
	sysFchmod
	sysFchmodat
	sysFchmodat2
	sysChown
	sysLchown
	sysFchown
	sysFchownat
	sysUtime
	sysUtimes
	sysFutimesat
	sysUtimensat
	sysSetxattr
	sysLsetxattr
	sysFsetxattr
	sysSetxattrat
	sysRemovexattr
	sysLremovexattr
	sysFremovexattr
	sysRemovexattrat

	sysConnect // connect.go
	sysFork    // clone, fork, vfork: fork.go

	// Calls that name another process by pid (proc_targets.go).
	sysPrlimit
	sysSchedPid // sched_setaffinity, sched_setscheduler, sched_setparam, sched_setattr
	sysMemPid   // migrate_pages, move_pages
	sysSetpriority
	sysIoprioSet
	sysKill
	sysTkill
	sysTgkill
	sysRtSigqueueinfo
	sysRtTgsigqueueinfo
	sysPidfdSendSignal
	sysFcntl

	// File calls handled on old Landlock ABIs (files.go).
	sysTruncate
	sysRename
	sysRenameat
	sysRenameat2
	sysLink
	sysLinkat

	sysSigaction // rt_sigaction(SIGCHLD): sigaction.go
	sysSocket    // socket(2): inet.go

	// Calls that add a name to a directory, under the persistence
	// guard's refusal of a new .git (create.go).
	sysMkdir
	sysMkdirat
	sysSymlink
	sysSymlinkat
	sysMknod
	sysMknodat
	sysOpen
	sysOpenat
	sysCreat
	// Removals, under the core's guarded work tree (guardtree.go).
	sysUnlink
	sysUnlinkat
	sysRmdir
	// setgroups, sent with the calls above: it would change what the
	// handlers keep of a task's status between its calls (proc.go,
	// keptStatus).
	sysSetgroups
)

// sysCalls are the handled calls by name, one table for every
// architecture: the numbers are seccomp's (seccomp.Number), which the
// filter routes here, and a call an architecture lacks (arm64 has only the
// *at forms of the path calls, no fork or vfork) has none there.
var sysCalls = []sysEntry{
	// Metadata calls (handle.go).
	{"chmod", sysChmod},
	{"fchmod", sysFchmod},
	{"fchmodat", sysFchmodat},
	{"fchmodat2", sysFchmodat2},
	{"chown", sysChown},
	{"lchown", sysLchown},
	{"fchown", sysFchown},
	{"fchownat", sysFchownat},
	{"utime", sysUtime},
	{"utimes", sysUtimes},
	{"futimesat", sysFutimesat},
	{"utimensat", sysUtimensat},
	{"setxattr", sysSetxattr},
	{"lsetxattr", sysLsetxattr},
	{"fsetxattr", sysFsetxattr},
	{"setxattrat", sysSetxattrat},
	{"removexattr", sysRemovexattr},
	{"lremovexattr", sysLremovexattr},
	{"fremovexattr", sysFremovexattr},
	{"removexattrat", sysRemovexattrat},
	{"connect", sysConnect},
	{"clone", sysFork},
	{"fork", sysFork},
	{"vfork", sysFork},
	// Calls that name another process (proc_targets.go).
	{"prlimit64", sysPrlimit},
	{"sched_setaffinity", sysSchedPid},
	{"sched_setscheduler", sysSchedPid},
	{"sched_setparam", sysSchedPid},
	{"sched_setattr", sysSchedPid},
	{"migrate_pages", sysMemPid},
	{"move_pages", sysMemPid},
	{"setpriority", sysSetpriority},
	{"ioprio_set", sysIoprioSet},
	{"kill", sysKill},
	{"tkill", sysTkill},
	{"tgkill", sysTgkill},
	{"rt_sigqueueinfo", sysRtSigqueueinfo},
	{"rt_tgsigqueueinfo", sysRtTgsigqueueinfo},
	{"pidfd_send_signal", sysPidfdSendSignal},
	{"fcntl", sysFcntl},
	// File calls (files.go).
	{"truncate", sysTruncate},
	{"rename", sysRename},
	{"renameat", sysRenameat},
	{"renameat2", sysRenameat2},
	{"link", sysLink},
	{"linkat", sysLinkat},
	{"rt_sigaction", sysSigaction},
	{"socket", sysSocket},
	// Calls that create or remove names (create.go).
	{"mkdir", sysMkdir},
	{"mkdirat", sysMkdirat},
	{"symlink", sysSymlink},
	{"symlinkat", sysSymlinkat},
	{"mknod", sysMknod},
	{"mknodat", sysMknodat},
	{"open", sysOpen},
	{"openat", sysOpenat},
	{"creat", sysCreat},
	{"unlink", sysUnlink},
	{"unlinkat", sysUnlinkat},
	{"rmdir", sysRmdir},
	{"setgroups", sysSetgroups},
}

// sysTable maps the native architecture's number of each call of sysCalls
// to its entry. It is empty on an architecture seccomp has no numbers for,
// so that every notification there is refused.
var sysTable = nativeTable(sysCalls)

func nativeTable(calls []sysEntry) map[int32]sysEntry {
	m := make(map[int32]sysEntry, len(calls))
	arch, err := seccomp.NativeArch()
	if err != nil {
		return m
	}
	for _, e := range calls {
		if nr, ok := seccomp.Number(arch, e.name); ok {
			m[int32(nr)] = e
		}
	}
	return m
}
