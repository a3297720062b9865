package plan

// Arch is the system-call ABI a seccomp filter is built for, in GOARCH
// spelling ("amd64", "arm64"). The planner sets the running binary's;
// internal/seccomp names the ones it supports and refuses any other, the
// empty one included, rather than producing a filter for the wrong ABI.
type Arch string

// Seccomp is the seccomp layer's configuration, and its only one:
// internal/seccomp builds the filter from exactly this section of the plan,
// and the supervisor (internal/notify) handles the calls it hands over.
// A notified call gated by one of these switches is a row of
// internal/seccomp's tables and a handler in internal/notify; a new switch
// is a field here, set by the planner.
type Seccomp struct {
	// Arch is the ABI of the command the filter is installed for; it
	// must match the kernel ABI the command runs under (the planner sets
	// the running binary's).
	Arch Arch `json:"arch"`

	// NotifyMetadata makes chmod, fchmod, fchmodat, fchmodat2, chown,
	// fchown, lchown, fchownat, utime, utimes, futimesat, utimensat,
	// setxattr, lsetxattr, fsetxattr, removexattr, lremovexattr,
	// fremovexattr, setxattrat and removexattrat (those that exist on
	// Arch) return SECCOMP_RET_USER_NOTIF, so that a supervisor resolves
	// the path and decides. The filter must then be installed with a
	// listener, or the kernel fails these calls with ENOSYS.
	NotifyMetadata bool `json:"notify_metadata"`

	// NotifyConnect makes connect(2) return SECCOMP_RET_USER_NOTIF (the
	// supervisor checks pathname unix sockets). Needs a listener too.
	NotifyConnect bool `json:"notify_connect"`

	// NotifyProcTargets makes the calls that act on another process by
	// pid or pidfd and that Landlock's scopes never cover (prlimit64,
	// sched_set*, setpriority, ioprio_set, migrate_pages, move_pages) go
	// to the supervisor unless they name the caller (pid 0), and refuses
	// the forms that name a user, another process group, or a pidfd
	// (process_mrelease). The planner sets it, and NotifySignals, only
	// where the run has no PID namespace (the core): in one, the kernel
	// already resolves pids within the run (CheckBackend refuses them in
	// another backend's plan). Needs a listener.
	NotifyProcTargets bool `json:"notify_proc_targets,omitempty"`

	// NotifySignals makes kill (but for pid 0), tkill, tgkill,
	// rt_sigqueueinfo, rt_tgsigqueueinfo, pidfd_send_signal and
	// fcntl(F_SETOWN) go to the supervisor, and refuses F_SETOWN_EX,
	// FIOSETOWN and SIOCSPGRP: what Landlock's signal scope (ABI 6) does
	// where the kernel lacks it and no PID namespace does. Needs a
	// listener.
	NotifySignals bool `json:"notify_signals,omitempty"`

	// NotifyFork makes clone(2) without namespace flags, fork(2) and
	// vfork(2) return SECCOMP_RET_USER_NOTIF, so that a supervisor counts
	// the run's tasks and refuses the call past Rlimits.NProc (uid 0,
	// which RLIMIT_NPROC does not bound, where no pids cgroup can be
	// made; see MaxTasks). clone3 stays ENOSYS. Needs a listener too.
	NotifyFork bool `json:"notify_fork,omitempty"`

	// NotifyInet is network = "allowlist": socket() for AF_INET and
	// AF_INET6 with SOCK_STREAM and protocol 0 or IPPROTO_TCP returns
	// SECCOMP_RET_USER_NOTIF (the supervisor hands back an unconnected
	// placeholder that connects only to Plan.EgressProxy, see
	// internal/notify/inet.go); every other internet socket (UDP, raw,
	// ICMP, MPTCP, SCTP) fails with EACCES or EPROTONOSUPPORT. Needs
	// NotifyConnect and a listener.
	NotifyInet bool `json:"notify_inet,omitempty"`

	// ReportInet is network = "deny-all" with a listener: socket() for
	// AF_INET and AF_INET6 (any type) returns SECCOMP_RET_USER_NOTIF, and
	// the supervisor refuses it with EAFNOSUPPORT, the errno the filter
	// gives every other family, recording the denial so that the run
	// reports it with its fix. Ignored with NotifyInet.
	ReportInet bool `json:"report_inet,omitempty"`

	// AllowUnixDgram permits AF_UNIX datagram sockets. When false,
	// socket() and socketpair() with AF_UNIX fail with EACCES unless the
	// type is SOCK_STREAM or SOCK_SEQPACKET: an unconnected datagram
	// socket can sendto() any pathname socket on the host without ever
	// calling connect(), which is what NotifyConnect watches.
	AllowUnixDgram bool `json:"allow_unix_dgram"`

	// NotifyTruncate is for Landlock ABI < 3, which has no TRUNCATE right:
	// truncate(2) returns SECCOMP_RET_USER_NOTIF (the supervisor truncates
	// only inside the writable roots), and open/openat with O_TRUNC fail
	// with EACCES unless the file is opened for writing. Needs a listener.
	NotifyTruncate bool `json:"notify_truncate,omitempty"`

	// NotifyRename is for Landlock ABI 1, which has no REFER right and
	// refuses every rename or link across directories: rename, renameat,
	// renameat2, link and linkat return SECCOMP_RET_USER_NOTIF (the
	// supervisor performs those inside the writable roots). Needs a
	// listener.
	NotifyRename bool `json:"notify_rename,omitempty"`

	// NotifyCreate is the persistence guard's refusal of a new .git
	// (only for a run that guards a git work tree): every call that adds
	// a name to a directory returns SECCOMP_RET_USER_NOTIF (mkdir,
	// mkdirat, symlink, symlinkat, mknod, mknodat, creat, rename,
	// renameat, renameat2, link, linkat, and open and openat with
	// O_CREAT once the mode and truncation checks passed); the
	// supervisor performs them on its own copy of the names, and with
	// namespaces resolves the command's paths in the command's own tree
	// (notify.creator.namespaced). setgroups is sent too. Needs a
	// listener.
	NotifyCreate bool `json:"notify_create,omitempty"`

	// NotifyGuardTree completes NotifyCreate where Landlock itself keeps
	// the guarded paths read-only (the core), granting the directories on
	// the way to them entry by entry: truncate, unlink, unlinkat, rmdir
	// and open/openat for writing or with O_TRUNC return
	// SECCOMP_RET_USER_NOTIF too, so that the supervisor can perform
	// them on entries made during the run, which no rule covers. Needs
	// a listener.
	NotifyGuardTree bool `json:"notify_guard_tree,omitempty"`
}

// Listener reports whether the filter built from s hands calls to a
// supervisor, which then needs the filter's listener.
func (s Seccomp) Listener() bool {
	return s.NotifyMetadata || s.NotifyConnect || s.NotifyProcTargets || s.NotifySignals ||
		s.NotifyTruncate || s.NotifyRename || s.NotifyFork || s.NotifyInet || s.ReportInet || s.NotifyCreate || s.NotifyGuardTree
}

// MaxTasks is the bound the supervisor keeps on the run's tasks: the
// process limit when Seccomp.NotifyFork is set, else 0 (none).
func (p *Plan) MaxTasks() int {
	if !p.Seccomp.NotifyFork {
		return 0
	}
	return int(p.Rlimits.NProc)
}
