//go:build linux

package seccomp

import "github.com/confine-sandbox/confine/internal/plan"

// Syscall numbers of the calls the filter acts on: one table, a row a
// call, a column an architecture.
//
// They are written out by hand rather than taken from golang.org/x/sys/unix
// because unix.SYS_* only describes the GOARCH being compiled, while Build
// must produce the arm64 filter on an amd64 host and vice versa. A call
// that does not exist on an architecture has none in its column (arm64
// has no chmod, open-style legacy calls, iopl...), and the filter simply
// has no rule for it there. From 424 on (Linux 5.1) every architecture
// numbers a call alike. nr_amd64_test.go and nr_arm64_test.go check every
// number against unix.SYS_* on the matching GOARCH.
//
// Sources: amd64 from arch/x86/entry/syscalls/syscall_64.tbl (the "common"
// and "64" ABIs; the x32 numbers are killed by the filter as a whole),
// arm64 from include/uapi/asm-generic/unistd.h (the generic table arm64
// uses; it lacks the legacy path-based calls superseded by *at ones).

// sysnum is a call's number on each architecture; none where it is absent.
type sysnum struct {
	name         string
	amd64, arm64 int
}

// none marks a call an architecture lacks.
const none = -1

// sysnums are the calls any rule names: those both architectures have,
// sorted by their amd64 number, then those arm64 lacks.
var sysnums = []sysnum{
	{"rt_sigaction", 13, 134},
	{"ioctl", 16, 29},
	{"socket", 41, 198},
	{"connect", 42, 203},
	{"socketpair", 53, 199},
	{"clone", 56, 220},
	{"kill", 62, 129},
	{"fcntl", 72, 25},
	{"truncate", 76, 45},
	{"fchmod", 91, 52},
	{"fchown", 93, 55},
	{"ptrace", 101, 117},
	{"syslog", 103, 116},
	{"rt_sigqueueinfo", 129, 138},
	{"personality", 135, 92},
	{"setpriority", 141, 140},
	{"sched_setparam", 142, 118},
	{"sched_setscheduler", 144, 119},
	{"vhangup", 153, 58},
	{"pivot_root", 155, 41},
	{"adjtimex", 159, 171},
	{"chroot", 161, 51},
	{"acct", 163, 89},
	{"settimeofday", 164, 170},
	{"mount", 165, 40},
	{"umount2", 166, 39},
	{"swapon", 167, 224},
	{"swapoff", 168, 225},
	{"reboot", 169, 142},
	{"sethostname", 170, 161},
	{"setdomainname", 171, 162},
	{"init_module", 175, 105},
	{"delete_module", 176, 106},
	{"quotactl", 179, 60},
	{"nfsservctl", 180, 42},
	{"setxattr", 188, 5},
	{"lsetxattr", 189, 6},
	{"fsetxattr", 190, 7},
	{"removexattr", 197, 14},
	{"lremovexattr", 198, 15},
	{"fremovexattr", 199, 16},
	{"tkill", 200, 130},
	{"sched_setaffinity", 203, 122},
	{"lookup_dcookie", 212, 18},
	{"clock_settime", 227, 112},
	{"tgkill", 234, 131},
	{"kexec_load", 246, 104},
	{"add_key", 248, 217},
	{"request_key", 249, 218},
	{"keyctl", 250, 219},
	{"ioprio_set", 251, 30},
	{"migrate_pages", 256, 238},
	{"openat", 257, 56},
	{"mkdirat", 258, 34},
	{"setgroups", 116, 159},
	{"mknodat", 259, 33},
	{"fchownat", 260, 54},
	{"unlinkat", 263, 35},
	{"renameat", 264, 38},
	{"linkat", 265, 37},
	{"symlinkat", 266, 36},
	{"fchmodat", 268, 53},
	{"unshare", 272, 97},
	{"move_pages", 279, 239},
	{"utimensat", 280, 88},
	{"rt_tgsigqueueinfo", 297, 240},
	{"perf_event_open", 298, 241},
	{"fanotify_init", 300, 262},
	{"prlimit64", 302, 261},
	{"name_to_handle_at", 303, 264},
	{"open_by_handle_at", 304, 265},
	{"clock_adjtime", 305, 266},
	{"setns", 308, 268},
	{"process_vm_readv", 310, 270},
	{"process_vm_writev", 311, 271},
	{"finit_module", 313, 273},
	{"sched_setattr", 314, 274},
	{"renameat2", 316, 276},
	{"kexec_file_load", 320, 294},
	{"bpf", 321, 280},
	{"userfaultfd", 323, 282},
	{"pidfd_send_signal", 424, 424},
	{"io_uring_setup", 425, 425},
	{"io_uring_enter", 426, 426},
	{"io_uring_register", 427, 427},
	{"open_tree", 428, 428},
	{"move_mount", 429, 429},
	{"fsopen", 430, 430},
	{"fsconfig", 431, 431},
	{"fsmount", 432, 432},
	{"fspick", 433, 433},
	{"clone3", 435, 435},
	{"openat2", 437, 437},
	{"pidfd_getfd", 438, 438},
	{"process_madvise", 440, 440},
	{"mount_setattr", 442, 442},
	{"quotactl_fd", 443, 443},
	{"process_mrelease", 448, 448},
	{"fchmodat2", 452, 452},
	{"setxattrat", 463, 463},
	{"removexattrat", 466, 466},
	{"open_tree_attr", 467, 467},
	{"file_setattr", 469, 469},
	// Legacy calls arm64 lacks (it has only their *at or newer forms).
	{"open", 2, none},
	{"fork", 57, none},
	{"vfork", 58, none},
	{"rename", 82, none},
	{"mkdir", 83, none},
	{"rmdir", 84, none},
	{"creat", 85, none},
	{"link", 86, none},
	{"unlink", 87, none},
	{"symlink", 88, none},
	{"chmod", 90, none},
	{"chown", 92, none},
	{"lchown", 94, none},
	{"utime", 132, none},
	{"mknod", 133, none},
	{"uselib", 134, none},
	{"modify_ldt", 154, none},
	{"iopl", 172, none},
	{"ioperm", 173, none},
	{"utimes", 235, none},
	{"futimesat", 261, none},
}

// The per-architecture lookup tables built from sysnums.
var amd64Nr, arm64Nr = numbers(sysnums, AMD64), numbers(sysnums, ARM64)

// numbers is arch's column of rows as a map from name to number.
func numbers(rows []sysnum, arch plan.Arch) map[string]uint32 {
	m := make(map[string]uint32, len(rows))
	for _, r := range rows {
		nr := r.amd64
		if arch == ARM64 {
			nr = r.arm64
		}
		if nr != none {
			m[r.name] = uint32(nr)
		}
	}
	return m
}

// Number is the number of the call name on arch; false when arch lacks it
// or the table does not name it. The supervisor (internal/notify) maps the
// numbers it is notified of back to its handlers with it, so both sides
// read one table.
func Number(arch plan.Arch, name string) (uint32, bool) {
	_, table, err := archInfo(arch)
	if err != nil {
		return 0, false
	}
	nr, ok := table[name]
	return nr, ok
}
