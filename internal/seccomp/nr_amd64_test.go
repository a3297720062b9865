//go:build linux

package seccomp

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The hand-written amd64 numbers must agree with x/sys/unix, which is
// generated from the kernel headers for this GOARCH.
func TestNumbersMatchUnix(t *testing.T) {
	want := map[string]uint32{
		"ioctl": unix.SYS_IOCTL, "socket": unix.SYS_SOCKET, "connect": unix.SYS_CONNECT,
		"socketpair": unix.SYS_SOCKETPAIR, "clone": unix.SYS_CLONE, "fork": unix.SYS_FORK, "vfork": unix.SYS_VFORK, "chmod": unix.SYS_CHMOD,
		"fchmod": unix.SYS_FCHMOD, "chown": unix.SYS_CHOWN, "fchown": unix.SYS_FCHOWN,
		"lchown": unix.SYS_LCHOWN, "ptrace": unix.SYS_PTRACE, "syslog": unix.SYS_SYSLOG,
		"utime": unix.SYS_UTIME, "uselib": unix.SYS_USELIB, "personality": unix.SYS_PERSONALITY,
		"vhangup": unix.SYS_VHANGUP, "modify_ldt": unix.SYS_MODIFY_LDT, "pivot_root": unix.SYS_PIVOT_ROOT,
		"adjtimex": unix.SYS_ADJTIMEX, "chroot": unix.SYS_CHROOT, "acct": unix.SYS_ACCT,
		"settimeofday": unix.SYS_SETTIMEOFDAY, "mount": unix.SYS_MOUNT, "umount2": unix.SYS_UMOUNT2,
		"swapon": unix.SYS_SWAPON, "swapoff": unix.SYS_SWAPOFF, "reboot": unix.SYS_REBOOT,
		"sethostname": unix.SYS_SETHOSTNAME, "setdomainname": unix.SYS_SETDOMAINNAME,
		"iopl": unix.SYS_IOPL, "ioperm": unix.SYS_IOPERM, "init_module": unix.SYS_INIT_MODULE,
		"delete_module": unix.SYS_DELETE_MODULE, "quotactl": unix.SYS_QUOTACTL,
		"nfsservctl": unix.SYS_NFSSERVCTL, "setxattr": unix.SYS_SETXATTR, "lsetxattr": unix.SYS_LSETXATTR,
		"fsetxattr": unix.SYS_FSETXATTR, "removexattr": unix.SYS_REMOVEXATTR,
		"lremovexattr": unix.SYS_LREMOVEXATTR, "fremovexattr": unix.SYS_FREMOVEXATTR,
		"lookup_dcookie": unix.SYS_LOOKUP_DCOOKIE, "clock_settime": unix.SYS_CLOCK_SETTIME,
		"utimes": unix.SYS_UTIMES, "kexec_load": unix.SYS_KEXEC_LOAD, "add_key": unix.SYS_ADD_KEY,
		"request_key": unix.SYS_REQUEST_KEY, "keyctl": unix.SYS_KEYCTL, "fchownat": unix.SYS_FCHOWNAT,
		"futimesat": unix.SYS_FUTIMESAT, "fchmodat": unix.SYS_FCHMODAT, "unshare": unix.SYS_UNSHARE,
		"utimensat": unix.SYS_UTIMENSAT, "perf_event_open": unix.SYS_PERF_EVENT_OPEN,
		"fanotify_init": unix.SYS_FANOTIFY_INIT, "name_to_handle_at": unix.SYS_NAME_TO_HANDLE_AT,
		"open_by_handle_at": unix.SYS_OPEN_BY_HANDLE_AT, "clock_adjtime": unix.SYS_CLOCK_ADJTIME,
		"setns": unix.SYS_SETNS, "process_vm_readv": unix.SYS_PROCESS_VM_READV,
		"process_vm_writev": unix.SYS_PROCESS_VM_WRITEV, "finit_module": unix.SYS_FINIT_MODULE,
		"kexec_file_load": unix.SYS_KEXEC_FILE_LOAD, "bpf": unix.SYS_BPF, "userfaultfd": unix.SYS_USERFAULTFD,
		"io_uring_setup": unix.SYS_IO_URING_SETUP, "io_uring_enter": unix.SYS_IO_URING_ENTER,
		"io_uring_register": unix.SYS_IO_URING_REGISTER, "open_tree": unix.SYS_OPEN_TREE,
		"move_mount": unix.SYS_MOVE_MOUNT, "fsopen": unix.SYS_FSOPEN, "fsconfig": unix.SYS_FSCONFIG,
		"fsmount": unix.SYS_FSMOUNT, "fspick": unix.SYS_FSPICK, "clone3": unix.SYS_CLONE3,
		"pidfd_getfd": unix.SYS_PIDFD_GETFD, "process_madvise": unix.SYS_PROCESS_MADVISE,
		"mount_setattr": unix.SYS_MOUNT_SETATTR, "quotactl_fd": unix.SYS_QUOTACTL_FD,
		"fchmodat2": unix.SYS_FCHMODAT2, "setxattrat": unix.SYS_SETXATTRAT,
		"removexattrat": unix.SYS_REMOVEXATTRAT, "open_tree_attr": unix.SYS_OPEN_TREE_ATTR, "file_setattr": unix.SYS_FILE_SETATTR,
		"kill": unix.SYS_KILL, "fcntl": unix.SYS_FCNTL, "rt_sigqueueinfo": unix.SYS_RT_SIGQUEUEINFO,
		"rt_sigaction": unix.SYS_RT_SIGACTION,
		"setpriority":  unix.SYS_SETPRIORITY, "sched_setparam": unix.SYS_SCHED_SETPARAM,
		"sched_setscheduler": unix.SYS_SCHED_SETSCHEDULER, "tkill": unix.SYS_TKILL,
		"sched_setaffinity": unix.SYS_SCHED_SETAFFINITY, "tgkill": unix.SYS_TGKILL,
		"ioprio_set": unix.SYS_IOPRIO_SET, "migrate_pages": unix.SYS_MIGRATE_PAGES,
		"move_pages": unix.SYS_MOVE_PAGES, "rt_tgsigqueueinfo": unix.SYS_RT_TGSIGQUEUEINFO,
		"prlimit64": unix.SYS_PRLIMIT64, "sched_setattr": unix.SYS_SCHED_SETATTR,
		"pidfd_send_signal": unix.SYS_PIDFD_SEND_SIGNAL, "process_mrelease": unix.SYS_PROCESS_MRELEASE,
	}
	for n, nr := range filesWant {
		want[n] = nr
	}
	checkTable(t, "amd64Nr", amd64Nr, want)
	checkTable(t, "commonAMD64", commonAMD64, map[string]uint32{
		"read": unix.SYS_READ, "write": unix.SYS_WRITE, "close": unix.SYS_CLOSE, "fstat": unix.SYS_FSTAT,
		"mmap": unix.SYS_MMAP, "mprotect": unix.SYS_MPROTECT, "brk": unix.SYS_BRK,
		"rt_sigaction": unix.SYS_RT_SIGACTION, "pread64": unix.SYS_PREAD64, "getpid": unix.SYS_GETPID,
		"sendto": unix.SYS_SENDTO, "sendmsg": unix.SYS_SENDMSG, "bind": unix.SYS_BIND,
		"listen": unix.SYS_LISTEN, "fork": unix.SYS_FORK, "vfork": unix.SYS_VFORK,
		"execve": unix.SYS_EXECVE, "wait4": unix.SYS_WAIT4, "kill": unix.SYS_KILL, "prctl": unix.SYS_PRCTL,
		"futex": unix.SYS_FUTEX, "getdents64": unix.SYS_GETDENTS64, "exit_group": unix.SYS_EXIT_GROUP,
		"newfstatat": unix.SYS_NEWFSTATAT, "accept4": unix.SYS_ACCEPT4,
		"seccomp": unix.SYS_SECCOMP, "memfd_create": unix.SYS_MEMFD_CREATE, "statx": unix.SYS_STATX,
		"rseq": unix.SYS_RSEQ, "pidfd_open": unix.SYS_PIDFD_OPEN, "faccessat2": unix.SYS_FACCESSAT2,
		"landlock_create_ruleset": unix.SYS_LANDLOCK_CREATE_RULESET, "getxattr": unix.SYS_GETXATTR, "getppid": unix.SYS_GETPPID,
	})
}
