//go:build linux

package seccomp

import (
	"golang.org/x/net/bpf"
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

// metadataCalls go to the supervisor under Config.NotifyMetadata.
var metadataCalls = []string{
	"chmod", "fchmod", "fchmodat", "fchmodat2",
	"chown", "fchown", "lchown", "fchownat",
	"utime", "utimes", "futimesat", "utimensat",
	"setxattr", "lsetxattr", "fsetxattr",
	"removexattr", "lremovexattr", "fremovexattr",
	"setxattrat", "removexattrat",
}

// forkCalls go to the supervisor under Config.NotifyFork; clone does too,
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

func cloneDoc(cfg Config) []Rule {
	rs := []Rule{{When: "flags & CLONE_NEW* != 0", Errno: unix.EPERM}}
	if cfg.NotifyFork {
		rs = append(rs, Rule{When: "flags & CLONE_NEW* == 0", Notify: true})
	}
	return rs
}

// argRules are the syscalls whose outcome depends on their arguments. Each
// block starts with nr in A and only compares low argument words (argLow):
// the kernel truncates these int arguments, so the high word is noise the
// caller controls.
func argRules(cfg Config) []entry {
	eperm := errno(unix.EPERM)

	// socket(domain, type, protocol) and socketpair(domain, type,
	// protocol, sv): local sockets only. Covers MPTCP and every other
	// network protocol, which all need a non-AF_UNIX domain.
	sock := func(a *assembler, cfg Config) {
		a.loadWord(argLow(0))
		a.jumpIf(bpf.JumpEqual, afUnix, next, a.ret(errno(unix.EAFNOSUPPORT)))
		if !cfg.AllowUnixDgram {
			// An allowlist rather than "!= SOCK_DGRAM": AF_UNIX
			// silently turns SOCK_RAW into SOCK_DGRAM.
			proto := a.newLabel()
			a.loadWord(argLow(1))
			a.insn(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask})
			a.jumpIf(bpf.JumpEqual, sockStream, proto, next)
			a.jumpIf(bpf.JumpEqual, sockSeqpacket, proto, a.ret(errno(unix.EACCES)))
			a.mark(proto)
		}
		a.loadWord(argLow(2))
		a.jumpIf(bpf.JumpEqual, 0, a.ret(unix.SECCOMP_RET_ALLOW), a.ret(errno(unix.EPROTONOSUPPORT)))
	}
	sockDoc := []Rule{{When: "domain != AF_UNIX", Errno: unix.EAFNOSUPPORT}}
	if !cfg.AllowUnixDgram {
		sockDoc = append(sockDoc, Rule{When: "(type & 0xf) not SOCK_STREAM or SOCK_SEQPACKET", Errno: unix.EACCES})
	}
	sockDoc = append(sockDoc, Rule{When: "protocol != 0", Errno: unix.EPROTONOSUPPORT})

	ioctlDoc := []Rule{
		{When: "cmd == TIOCSTI", Errno: unix.EPERM},
		{When: "cmd == TIOCLINUX", Errno: unix.EPERM},
		{When: "cmd == FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS or FS_IOC_FSSETXATTR", Errno: unix.EPERM},
	}
	if cfg.NotifySignals {
		ioctlDoc = append(ioctlDoc, Rule{When: "cmd == FIOSETOWN or SIOCSPGRP", Errno: unix.EPERM})
	}

	socketBlock, socketDoc := sock, sockDoc
	switch {
	case cfg.NotifyInet:
		socketBlock, socketDoc = inetSocket(sock), inetSocketDoc(sockDoc)
	case cfg.ReportInet:
		socketBlock, socketDoc = reportInetSocket(sock), reportInetSocketDoc(sockDoc)
	}
	return []entry{
		{name: "socket", block: socketBlock, doc: socketDoc},
		{name: "socketpair", block: sock, doc: sockDoc},
		{
			// ioctl(fd, cmd, arg): TIOCSTI pushes input into a
			// terminal the sandbox shares with the user (typing
			// commands into their shell); TIOCLINUX can do the same
			// through the console's selection paste.
			name: "ioctl",
			block: func(a *assembler, cfg Config) {
				a.loadWord(argLow(1))
				a.jumpIf(bpf.JumpEqual, tiocsti, a.ret(eperm), next)
				a.jumpIf(bpf.JumpEqual, tioclinux, a.ret(eperm), next)
				a.jumpIf(bpf.JumpEqual, fsIocSetflags, a.ret(eperm), next)
				a.jumpIf(bpf.JumpEqual, fsIoc32Setflags, a.ret(eperm), next)
				if cfg.NotifySignals {
					// The ioctl forms of F_SETOWN (see procCalls) take
					// the pid in memory the filter cannot read.
					a.jumpIf(bpf.JumpEqual, fioSetown, a.ret(eperm), next)
					a.jumpIf(bpf.JumpEqual, siocSpgrp, a.ret(eperm), next)
				}
				a.jumpIf(bpf.JumpEqual, fsIocFssetxattr, a.ret(eperm), a.ret(unix.SECCOMP_RET_ALLOW))
			},
			doc: ioctlDoc,
		},
		{
			// clone(flags, ...): flags is arg0 on both amd64 and
			// arm64 (they differ only in the tid/tls order).
			name: "clone",
			block: func(a *assembler, cfg Config) {
				pass := uint32(unix.SECCOMP_RET_ALLOW)
				if cfg.NotifyFork {
					pass = unix.SECCOMP_RET_USER_NOTIF
				}
				a.loadWord(argLow(0))
				a.jumpIf(bpf.JumpBitsSet, nsFlags, a.ret(eperm), a.ret(pass))
			},
			doc: cloneDoc(cfg),
		},
		{
			// personality(persona): only the query and plain
			// PER_LINUX; flags such as ADDR_NO_RANDOMIZE or
			// READ_IMPLIES_EXEC weaken exploit mitigations for
			// whatever the command execs next.
			name: "personality",
			block: func(a *assembler, _ Config) {
				allow := a.ret(unix.SECCOMP_RET_ALLOW)
				a.loadWord(argLow(0))
				a.jumpIf(bpf.JumpEqual, personaQuery, allow, next)
				a.jumpIf(bpf.JumpEqual, personaLinux, allow, a.ret(eperm))
			},
			doc: []Rule{{When: "persona not 0 or 0xffffffff", Errno: unix.EPERM}},
		},
	}
}
