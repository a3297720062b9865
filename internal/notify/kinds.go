//go:build linux

package notify

// sysKind identifies a handled system call independently of its number
// (sysTable, per architecture, maps numbers to kinds). Kinds live only in
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
