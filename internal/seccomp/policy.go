//go:build linux

package seccomp

import (
	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// epermCalls fail with EPERM. A build or test run never needs them, and
// each either escapes or weakens the sandbox or is kernel attack surface
// out of proportion to its use. Names absent on an arch are skipped.
var epermCalls = []string{
	// Reading or changing other processes.
	"ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
	"process_madvise", // acts on another process's memory, like process_vm_*
	// Kernel attack surface with no place in a build.
	"bpf", "perf_event_open", "userfaultfd", "fanotify_init",
	"lookup_dcookie", "nfsservctl", "uselib",
	"modify_ldt", // x86: only 16-bit code (Wine, dosemu) needs an LDT
	// The kernel keyring is shared beyond the sandbox (user/session keys).
	"keyctl", "add_key", "request_key",
	// Mount table and root changes: escaping Landlock's view of paths.
	"mount", "umount2", "pivot_root", "chroot",
	"fsopen", "fsconfig", "fsmount", "fspick", "move_mount",
	"open_tree", "open_tree_attr", "mount_setattr",
	// Namespaces: new user namespaces grant capabilities inside them.
	"unshare", "setns",
	// Whole-machine administration.
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "reboot", "swapon", "swapoff", "acct",
	"iopl", "ioperm", "quotactl", "quotactl_fd", "vhangup", "syslog",
	"sethostname", "setdomainname",
	"settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
	// File handles bypass path-based checks (Landlock sees no path).
	"open_by_handle_at", "name_to_handle_at",
	// Inode flags (immutable, append-only, project id) on any file the
	// command can open read-only; Landlock does not restrict it.
	"file_setattr",
}

// enosysCalls fail with ENOSYS, which callers take as "not implemented"
// and fall back: io_uring performs I/O (including socket creation and
// connect) without passing through this filter; clone3 passes its flags in
// memory the filter cannot read, and libc and Go fall back to clone, whose
// flags are checked.
var enosysCalls = []string{
	"io_uring_setup", "io_uring_enter", "io_uring_register", "clone3",
}

// metadataCalls go to the supervisor under plan.Seccomp.NotifyMetadata.
var metadataCalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat", "utimensat",
	"setxattr", "lsetxattr", "fsetxattr",
	"removexattr", "lremovexattr", "fremovexattr",
	"setxattrat", "removexattrat",
}

// forkCalls go to the supervisor under plan.Seccomp.NotifyFork; clone does too,
// through its argument block, when it creates no namespace. (arm64 has
// only clone.)
var forkCalls = []string{"fork", "vfork"}

// nsFlags are the clone flags that create namespaces. CLONE_NEWTIME (0x80)
// falls inside the exit-signal byte of legacy clone(), where the kernel
// does not read it as a flag; since no valid signal is >= 128 it is safe to
// include and keeps the mask the same as unshare's.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET |
	unix.CLONE_NEWCGROUP | unix.CLONE_NEWTIME

// Values the argument blocks compare against. They are the same on amd64
// and arm64 (both use the asm-generic ioctl and socket numbering).
const (
	tiocsti   = 0x5412
	tioclinux = 0x541c
	// FS_IOC_SETFLAGS, its 32-bit twin and FS_IOC_FSSETXATTR: chattr
	// works on a read-only fd of an owned file anywhere.
	fsIocSetflags   = 0x40086602
	fsIoc32Setflags = 0x40046602
	fsIocFssetxattr = 0x401c5820
	sockTypeMask    = 0xf // SOCK_TYPE_MASK; the rest are SOCK_NONBLOCK/SOCK_CLOEXEC
	personaQuery    = 0xffffffff
	personaLinux    = 0 // PER_LINUX
	afUnix          = unix.AF_UNIX
	afInet          = unix.AF_INET
	afInet6         = unix.AF_INET6
	ipprotoTCP      = unix.IPPROTO_TCP
	sockStream      = unix.SOCK_STREAM
	sockSeqpacket   = unix.SOCK_SEQPACKET
)

// The words the argument rules read, and the constants they compare with.
var (
	sockDomain   = arg{i: 0, name: "domain"}
	sockType     = arg{i: 1, name: "type", mask: named{sockTypeMask, "0xf"}}
	sockProtocol = arg{i: 2, name: "protocol"}
	ioctlCmd     = arg{i: 1, name: "cmd"}
	cloneFlags   = arg{i: 0, name: "flags"}
	persona      = arg{i: 0, name: "persona"}

	namedAFUnix    = named{afUnix, "AF_UNIX"}
	namedAFInet    = named{afInet, "AF_INET"}
	namedAFInet6   = named{afInet6, "AF_INET6"}
	namedStream    = named{sockStream, "SOCK_STREAM"}
	namedSeqpacket = named{sockSeqpacket, "SOCK_SEQPACKET"}
)

// unixSocket are the rules of socket(domain, type, protocol) and
// socketpair(domain, type, protocol, sv): local sockets only. Covers MPTCP
// and every other network protocol, which all need a non-AF_UNIX domain.
func unixSocket(cfg plan.Seccomp) []argRule {
	rs := []argRule{when(errno(unix.EAFNOSUPPORT), isNot(sockDomain, namedAFUnix))}
	if !cfg.AllowUnixDgram {
		// An allowlist rather than "!= SOCK_DGRAM": AF_UNIX silently
		// turns SOCK_RAW into SOCK_DGRAM.
		rs = append(rs, when(errno(unix.EACCES), isNot(sockType, namedStream, namedSeqpacket)))
	}
	return append(rs, when(errno(unix.EPROTONOSUPPORT), isNot(sockProtocol, num(0))))
}

// argRules are the syscalls whose outcome depends on their arguments.
func argRules(cfg plan.Seccomp) []entry {
	eperm := errno(unix.EPERM)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	socket := unixSocket(cfg)
	switch {
	case cfg.NotifyInet:
		socket = append(inetSocket(), socket...)
	case cfg.ReportInet:
		socket = append(reportInetSocket(), socket...)
	}
	// ioctl(fd, cmd, arg): TIOCSTI pushes input into a terminal the
	// sandbox shares with the user (typing commands into their shell);
	// TIOCLINUX can do the same through the console's selection paste.
	// The FS_IOC_* ones set inode flags (chattr) on a read-only fd.
	ioctl := []argRule{
		when(eperm, is(ioctlCmd, named{tiocsti, "TIOCSTI"})),
		when(eperm, is(ioctlCmd, named{tioclinux, "TIOCLINUX"})),
		when(eperm, is(ioctlCmd, named{fsIocSetflags, "FS_IOC_SETFLAGS"}, named{fsIoc32Setflags, "FS_IOC32_SETFLAGS"}, named{fsIocFssetxattr, "FS_IOC_FSSETXATTR"})),
	}
	if cfg.NotifySignals {
		// The ioctl forms of F_SETOWN (see procCalls) take the pid in
		// memory the filter cannot read.
		ioctl = append(ioctl, when(eperm, is(ioctlCmd, named{fioSetown, "FIOSETOWN"}, named{siocSpgrp, "SIOCSPGRP"})))
	}
	clonePass := allow
	if cfg.NotifyFork {
		clonePass = unix.SECCOMP_RET_USER_NOTIF
	}
	return []entry{
		{name: "socket", rules: socket, ret: allow},
		{name: "socketpair", rules: unixSocket(cfg), ret: allow},
		{name: "ioctl", rules: ioctl, ret: allow},
		// clone(flags, ...): flags is arg0 on both amd64 and arm64 (they
		// differ only in the tid/tls order).
		{name: "clone", rules: []argRule{when(eperm, anySet(cloneFlags, named{nsFlags, "CLONE_NEW*"}))}, ret: clonePass},
		// personality(persona): only the query and plain PER_LINUX;
		// flags such as ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC weaken
		// exploit mitigations for whatever the command execs next.
		{name: "personality", rules: []argRule{when(eperm, isNot(persona, num(personaLinux), num(personaQuery)))}, ret: allow},
	}
}
