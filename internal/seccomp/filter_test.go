//go:build linux

package seccomp

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Return values the tests expect.
const (
	kill  = unix.SECCOMP_RET_KILL_PROCESS
	allow = unix.SECCOMP_RET_ALLOW
	notif = unix.SECCOMP_RET_USER_NOTIF
)

var (
	eperm           = errno(unix.EPERM)
	enosys          = errno(unix.ENOSYS)
	eacces          = errno(unix.EACCES)
	eafnosupport    = errno(unix.EAFNOSUPPORT)
	eprotonosupport = errno(unix.EPROTONOSUPPORT)
)

// Constants the tests pass as arguments that x/sys/unix does not define.
const (
	fionread        = 0x541b
	tcgets          = 0x5401
	readImpliesExec = 0x0400000
	addrNoRandomize = 0x0040000
	perLinux32      = 0x0008
	ipprotoMPTCP    = 262
	sigchld         = 17
	hi              = 1 << 32 // sets the high word of a 64-bit argument
)

// Syscalls without a rule, used to check that ordinary programs run. The
// numbers are checked against x/sys/unix in nr_<arch>_test.go.
var commonAMD64 = map[string]uint32{
	"read": 0, "write": 1, "close": 3, "fstat": 5, "mmap": 9, "mprotect": 10,
	"brk": 12, "rt_sigaction": 13, "pread64": 17, "getpid": 39, "sendto": 44,
	"sendmsg": 46, "bind": 49, "listen": 50, "fork": 57, "vfork": 58,
	"execve": 59, "wait4": 61, "kill": 62, "prctl": 157, "futex": 202,
	"getdents64": 217, "exit_group": 231, "newfstatat": 262,
	"accept4": 288, "seccomp": 317, "memfd_create": 319, "statx": 332,
	"rseq": 334, "pidfd_open": 434, "faccessat2": 439,
	"landlock_create_ruleset": 444, "getxattr": 191, "getppid": 110,
}

var commonARM64 = map[string]uint32{
	"read": 63, "write": 64, "close": 57, "fstat": 80, "mmap": 222, "mprotect": 226,
	"brk": 214, "rt_sigaction": 134, "pread64": 67, "getpid": 172, "sendto": 206,
	"sendmsg": 211, "bind": 200, "listen": 201,
	"execve": 221, "wait4": 260, "kill": 129, "prctl": 167, "futex": 98,
	"getdents64": 61, "exit_group": 94, "newfstatat": 79,
	"accept4": 242, "seccomp": 277, "memfd_create": 279, "statx": 291,
	"rseq": 293, "pidfd_open": 434, "faccessat2": 439,
	"landlock_create_ruleset": 444, "getxattr": 8, "getppid": 173,
}

// seccompData serializes struct seccomp_data for x/net/bpf's VM.
//
// The kernel's classic-BPF word loads read seccomp_data in native byte
// order, little-endian on both supported arches, so the filter compares
// host values (nr, arch, and the low word of args[i] at 16+8i, the high
// word at 20+8i). The VM instead decodes every 32-bit load big-endian.
// Writing each 32-bit word big-endian — i.e. the little-endian struct with
// every word byte-swapped — makes each VM load yield the value the kernel's
// load would, at the same offset.
func seccompData(arch, nr uint32, args [6]uint64) []byte {
	b := make([]byte, 64)
	be := binary.BigEndian
	be.PutUint32(b[offNr:], nr)
	be.PutUint32(b[offArch:], arch)
	for i, v := range args {
		be.PutUint32(b[argLow(i):], uint32(v))
		be.PutUint32(b[argLow(i)+4:], uint32(v>>32))
	}
	return b
}

// vm runs a built filter. It disassembles the raw program, so what is
// tested is exactly what Install would load.
type vm struct {
	arch  plan.Arch
	audit uint32
	table map[string]uint32
	m     *bpf.VM
}

func newVM(t testing.TB, cfg plan.Seccomp) *vm {
	t.Helper()
	return newVMOf(t, builtin, cfg)
}

// newVMOf runs the filter built from the tables tb.
func newVMOf(t testing.TB, tb tables, cfg plan.Seccomp) *vm {
	t.Helper()
	raw, err := tb.build(cfg)
	if err != nil {
		t.Fatalf("Build(%+v): %v", cfg, err)
	}
	prog, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("Build(%+v): program does not disassemble", cfg)
	}
	m, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	audit, _, err := archInfo(cfg.Arch)
	if err != nil {
		t.Fatal(err)
	}
	return &vm{cfg.Arch, audit, numbers(tb.nums, cfg.Arch), m}
}

func (v *vm) runArch(t testing.TB, arch, nr uint32, args ...uint64) uint32 {
	t.Helper()
	var a [6]uint64
	copy(a[:], args)
	r, err := v.m.Run(seccompData(arch, nr, a))
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return uint32(r)
}

func (v *vm) run(t testing.TB, nr uint32, args ...uint64) uint32 {
	t.Helper()
	return v.runArch(t, v.audit, nr, args...)
}

func (v *vm) nr(t testing.TB, name string) uint32 {
	t.Helper()
	if n, ok := v.table[name]; ok {
		return n
	}
	common := commonAMD64
	if v.arch == ARM64 {
		common = commonARM64
	}
	if n, ok := common[name]; ok {
		return n
	}
	t.Fatalf("no number for %s on %v", name, v.arch)
	return 0
}

func retName(r uint32) string {
	switch r {
	case kill:
		return "KILL_PROCESS"
	case allow:
		return "ALLOW"
	case notif:
		return "USER_NOTIF"
	}
	if r&unix.SECCOMP_RET_ACTION_FULL == unix.SECCOMP_RET_ERRNO {
		return "ERRNO(" + unix.ErrnoName(unix.Errno(r&unix.SECCOMP_RET_DATA)) + ")"
	}
	return fmt.Sprintf("%#x", r)
}

var arches = []plan.Arch{AMD64, ARM64}

type tcase struct {
	name string
	sys  string // syscall name
	args []uint64
	want uint32
}

func TestFilterTable(t *testing.T) {
	cases := []tcase{
		// socket: only AF_UNIX, judged on the low word of domain.
		{"inet", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, eafnosupport},
		{"inet6", "socket", []uint64{unix.AF_INET6, unix.SOCK_DGRAM, 0}, eafnosupport},
		{"netlink", "socket", []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, eafnosupport},
		{"packet", "socket", []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0x300}, eafnosupport},
		{"vsock", "socket", []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eafnosupport},
		{"alg", "socket", []uint64{unix.AF_ALG, unix.SOCK_SEQPACKET, 0}, eafnosupport},
		{"unspec", "socket", []uint64{unix.AF_UNSPEC, unix.SOCK_STREAM, 0}, eafnosupport},
		{"mptcp", "socket", []uint64{unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP}, eafnosupport},
		{"mptcp6", "socket", []uint64{unix.AF_INET6, unix.SOCK_STREAM, ipprotoMPTCP}, eafnosupport},
		{"inet high word", "socket", []uint64{unix.AF_INET | hi, unix.SOCK_STREAM, 0}, eafnosupport},
		{"inet all high bits", "socket", []uint64{unix.AF_INET | 0xffffffff<<32, unix.SOCK_STREAM, 0}, eafnosupport},
		{"high word only", "socket", []uint64{hi, unix.SOCK_STREAM, 0}, eafnosupport}, // kernel sees AF_UNSPEC
		{"unix high garbage", "socket", []uint64{unix.AF_UNIX | 0xdeadbeef<<32, unix.SOCK_STREAM, 0}, allow},
		{"unix stream", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
		{"unix stream flags", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC | unix.SOCK_NONBLOCK, 0}, allow},
		{"unix seqpacket", "socket", []uint64{unix.AF_UNIX, unix.SOCK_SEQPACKET, 0}, allow},
		{"unix dgram", "socket", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, eacces},
		{"unix dgram cloexec", "socket", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM | unix.SOCK_CLOEXEC, 0}, eacces},
		{"unix dgram high type", "socket", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM | hi, 0}, eacces},
		{"unix stream high type", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | 2*hi, 0}, allow},
		{"unix raw is dgram", "socket", []uint64{unix.AF_UNIX, unix.SOCK_RAW, 0}, eacces},
		{"unix protocol 1", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 1}, eprotonosupport},
		{"unix protocol high word", "socket", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, hi}, allow},
		// socketpair: same rules.
		{"inet", "socketpair", []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, eafnosupport},
		{"inet high word", "socketpair", []uint64{unix.AF_INET | hi, unix.SOCK_STREAM, 0}, eafnosupport},
		{"unix high garbage", "socketpair", []uint64{unix.AF_UNIX | 0xdeadbeef<<32, unix.SOCK_STREAM, 0}, allow},
		{"unix stream", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, allow},
		{"unix dgram", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, eacces},
		{"unix raw", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_RAW, 0}, eacces},
		{"unix protocol", "socketpair", []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 7}, eprotonosupport},
		// ioctl: TIOCSTI/TIOCLINUX by the low word of cmd.
		{"TIOCSTI", "ioctl", []uint64{0, tiocsti}, eperm},
		{"TIOCSTI high word", "ioctl", []uint64{0, tiocsti | hi}, eperm},
		{"TIOCSTI all high bits", "ioctl", []uint64{0, tiocsti | 0xffffffff<<32}, eperm},
		{"TIOCLINUX", "ioctl", []uint64{3, tioclinux}, eperm},
		{"TIOCLINUX high word", "ioctl", []uint64{3 | hi, tioclinux | hi}, eperm},
		{"FS_IOC_SETFLAGS", "ioctl", []uint64{3, fsIocSetflags}, eperm},
		{"FS_IOC32_SETFLAGS high word", "ioctl", []uint64{3, fsIoc32Setflags | hi}, eperm},
		{"FS_IOC_FSSETXATTR", "ioctl", []uint64{3, fsIocFssetxattr}, eperm},
		{"FS_IOC_GETFLAGS allowed", "ioctl", []uint64{3, 0x80086601}, allow},
		{"FIONREAD", "ioctl", []uint64{0, fionread}, allow},
		{"TCGETS", "ioctl", []uint64{1, tcgets, 0x7ffc0000}, allow},
		{"TIOCSTI in high word only", "ioctl", []uint64{0, tiocsti << 32}, allow},
		// clone: namespace flags in arg0's low word.
		{"newuser", "clone", []uint64{unix.CLONE_NEWUSER | sigchld}, eperm},
		{"newns", "clone", []uint64{unix.CLONE_NEWNS}, eperm},
		{"newuts", "clone", []uint64{unix.CLONE_NEWUTS}, eperm},
		{"newipc", "clone", []uint64{unix.CLONE_NEWIPC}, eperm},
		{"newpid", "clone", []uint64{unix.CLONE_NEWPID | sigchld}, eperm},
		{"newnet", "clone", []uint64{unix.CLONE_NEWNET}, eperm},
		{"newcgroup", "clone", []uint64{unix.CLONE_NEWCGROUP}, eperm},
		{"newtime", "clone", []uint64{unix.CLONE_NEWTIME}, eperm},
		{"newuser high garbage", "clone", []uint64{unix.CLONE_NEWUSER | 0xffff<<32}, eperm},
		{"fork", "clone", []uint64{sigchld}, allow},
		{"vfork", "clone", []uint64{unix.CLONE_VM | unix.CLONE_VFORK | sigchld}, allow},
		{"thread", "clone", []uint64{unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
			unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID |
			unix.CLONE_CHILD_CLEARTID, 0x7f0000000000}, allow},
		{"newuser in high word only", "clone", []uint64{unix.CLONE_NEWUSER << 32}, allow}, // kernel reads lower_32_bits
		// ENOSYS so that callers fall back.
		{"", "clone3", []uint64{0, 88}, enosys},
		{"", "io_uring_setup", []uint64{8, 0}, enosys},
		{"", "io_uring_enter", nil, enosys},
		{"", "io_uring_register", nil, enosys},
		// personality: query and PER_LINUX only.
		{"query", "personality", []uint64{0xffffffff}, allow},
		{"query high word", "personality", []uint64{0xffffffff | 0xffffffff<<32}, allow},
		{"PER_LINUX", "personality", []uint64{0}, allow},
		{"PER_LINUX high word", "personality", []uint64{hi}, allow},
		{"READ_IMPLIES_EXEC", "personality", []uint64{readImpliesExec}, eperm},
		{"ADDR_NO_RANDOMIZE", "personality", []uint64{addrNoRandomize}, eperm},
		{"PER_LINUX32", "personality", []uint64{perLinux32}, eperm},
		{"query low bits cleared", "personality", []uint64{0xfffffffe}, eperm},
		// Notification is off by default.
		{"", "connect", []uint64{3, 0, 110}, allow},
		{"", "fchmod", []uint64{3, 0o777}, allow},
		{"", "fchownat", nil, allow},
		{"", "setxattrat", nil, allow},
	}
	for _, arch := range arches {
		v := newVM(t, plan.Seccomp{Arch: arch})
		for _, c := range cases {
			t.Run(fmt.Sprintf("%v/%s/%s", arch, c.sys, c.name), func(t *testing.T) {
				if got := v.run(t, v.nr(t, c.sys), c.args...); got != c.want {
					t.Errorf("%s(%#x) = %s, want %s", c.sys, c.args, retName(got), retName(c.want))
				}
			})
		}
	}
}

func TestForeignArchKilled(t *testing.T) {
	cases := []struct {
		arch  plan.Arch
		audit uint32
		nr    uint32
	}{
		{AMD64, unix.AUDIT_ARCH_I386, 102},       // socketcall via int 0x80
		{AMD64, unix.AUDIT_ARCH_I386, 0},         // even a harmless i386 call
		{AMD64, unix.AUDIT_ARCH_AARCH64, 198},    // arm64 socket
		{AMD64, 0, 0},                            // garbage
		{ARM64, unix.AUDIT_ARCH_X86_64, 41},      // amd64 socket
		{ARM64, unix.AUDIT_ARCH_X86_64, 63},      // arm64's read nr, amd64 data
		{ARM64, unix.AUDIT_ARCH_ARM, 281},        // AArch32 socket
		{ARM64, unix.AUDIT_ARCH_AARCH64 &^ 1, 0}, // close but not equal
	}
	for _, c := range cases {
		for _, cfg := range []plan.Seccomp{{Arch: c.arch}, {Arch: c.arch, NotifyConnect: true, NotifyMetadata: true, AllowUnixDgram: true}} {
			v := newVM(t, cfg)
			if got := v.runArch(t, c.audit, c.nr, unix.AF_UNIX, unix.SOCK_STREAM); got != kill {
				t.Errorf("%v filter, arch %#x nr %d = %s, want KILL_PROCESS", c.arch, c.audit, c.nr, retName(got))
			}
		}
	}
}

func TestX32Killed(t *testing.T) {
	v := newVM(t, plan.Seccomp{Arch: AMD64})
	for _, nr := range []uint32{0, 1, 41, 42, 56, 435, 512, 547, 0x3fffffff, 0xffffffff} {
		if got := v.run(t, x32Bit|nr); got != kill {
			t.Errorf("amd64 nr %#x = %s, want KILL_PROCESS", x32Bit|nr, retName(got))
		}
	}
	// arm64 has no such bit; a huge nr is simply unknown to the kernel.
	v = newVM(t, plan.Seccomp{Arch: ARM64})
	if got := v.run(t, x32Bit|198, unix.AF_INET); got != allow {
		t.Errorf("arm64 nr %#x = %s, want ALLOW", x32Bit|198, retName(got))
	}
}

func TestEveryEPERMCall(t *testing.T) {
	for _, arch := range arches {
		v := newVM(t, plan.Seccomp{Arch: arch, NotifyConnect: true, NotifyMetadata: true})
		n := 0
		for _, name := range epermCalls {
			nr, ok := v.table[name]
			if !ok {
				continue
			}
			n++
			args := []uint64{0, 0, 0, 0, 0, 0}
			if got := v.run(t, nr, args...); got != eperm {
				t.Errorf("%v %s(%d) = %s, want ERRNO(EPERM)", arch, name, nr, retName(got))
			}
			// Arguments do not matter for these.
			if got := v.run(t, nr, ^uint64(0), hi, 1, 2, 3, 4); got != eperm {
				t.Errorf("%v %s(%d) with args = %s, want ERRNO(EPERM)", arch, name, nr, retName(got))
			}
		}
		if n < 45 {
			t.Errorf("%v: only %d EPERM calls exist in the table", arch, n)
		}
	}
}

func TestSpecificEPERMCalls(t *testing.T) {
	// The brief's list, spelled out so that dropping one from epermCalls
	// fails a test.
	both := []string{"ptrace", "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open",
		"userfaultfd", "keyctl", "add_key", "request_key", "mount", "umount2", "pivot_root", "chroot",
		"fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "open_tree_attr",
		"mount_setattr", "unshare", "setns", "kexec_load", "kexec_file_load", "init_module",
		"finit_module", "delete_module", "reboot", "swapon", "swapoff", "acct", "open_by_handle_at",
		"name_to_handle_at", "pidfd_getfd", "fanotify_init", "quotactl", "quotactl_fd",
		"lookup_dcookie", "vhangup", "syslog", "settimeofday", "clock_settime", "clock_adjtime",
		"adjtimex", "nfsservctl"}
	amd64Only := []string{"iopl", "ioperm", "uselib", "modify_ldt"}
	for _, arch := range arches {
		v := newVM(t, plan.Seccomp{Arch: arch})
		names := both
		if arch == AMD64 {
			names = append(slices.Clone(both), amd64Only...)
		}
		for _, name := range names {
			if got := v.run(t, v.nr(t, name)); got != eperm {
				t.Errorf("%v %s = %s, want ERRNO(EPERM)", arch, name, retName(got))
			}
		}
		if arch == ARM64 {
			for _, name := range amd64Only {
				if _, ok := v.table[name]; ok {
					t.Errorf("arm64 table has %s, which arm64 lacks", name)
				}
			}
		}
	}
}

func TestNotify(t *testing.T) {
	for _, arch := range arches {
		for _, cfg := range []plan.Seccomp{
			{Arch: arch},
			{Arch: arch, NotifyMetadata: true},
			{Arch: arch, NotifyConnect: true},
			{Arch: arch, NotifyMetadata: true, NotifyConnect: true, AllowUnixDgram: true},
		} {
			v := newVM(t, cfg)
			n := 0
			for _, name := range metadataCalls {
				nr, ok := v.table[name]
				if !ok {
					continue
				}
				n++
				want := uint32(allow)
				if cfg.NotifyMetadata {
					want = notif
				}
				if got := v.run(t, nr, 3, 0o644); got != want {
					t.Errorf("%+v: %s = %s, want %s", cfg, name, retName(got), retName(want))
				}
			}
			if wantN := map[plan.Arch]int{AMD64: 20, ARM64: 14}[arch]; n != wantN {
				t.Errorf("%v: %d metadata calls in table, want %d", arch, n, wantN)
			}
			want := uint32(allow)
			if cfg.NotifyConnect {
				want = notif
			}
			if got := v.run(t, v.nr(t, "connect"), 3, 0x7ffc0000, 110); got != want {
				t.Errorf("%+v: connect = %s, want %s", cfg, retName(got), retName(want))
			}
			// Flags do not change the fixed rules.
			if got := v.run(t, v.nr(t, "socket"), unix.AF_INET, unix.SOCK_STREAM); got != eafnosupport {
				t.Errorf("%+v: socket(AF_INET) = %s", cfg, retName(got))
			}
			if got := v.run(t, v.nr(t, "ptrace")); got != eperm {
				t.Errorf("%+v: ptrace = %s", cfg, retName(got))
			}
		}
	}
}

func TestAllowUnixDgram(t *testing.T) {
	for _, arch := range arches {
		v := newVM(t, plan.Seccomp{Arch: arch, AllowUnixDgram: true})
		for _, sys := range []string{"socket", "socketpair"} {
			nr := v.nr(t, sys)
			for _, c := range []struct {
				args []uint64
				want uint32
			}{
				{[]uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, allow},
				{[]uint64{unix.AF_UNIX, unix.SOCK_RAW | unix.SOCK_CLOEXEC, 0}, allow},
				{[]uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
				{[]uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 1}, eprotonosupport},
				{[]uint64{unix.AF_INET, unix.SOCK_DGRAM, 0}, eafnosupport},
				{[]uint64{unix.AF_INET | hi, unix.SOCK_DGRAM, 0}, eafnosupport},
			} {
				if got := v.run(t, nr, c.args...); got != c.want {
					t.Errorf("%v %s(%#x) = %s, want %s", arch, sys, c.args, retName(got), retName(c.want))
				}
			}
		}
	}
}

func TestCommonSyscallsAllowed(t *testing.T) {
	for _, arch := range arches {
		common := commonAMD64
		if arch == ARM64 {
			common = commonARM64
		}
		for _, cfg := range []plan.Seccomp{{Arch: arch}, {Arch: arch, NotifyMetadata: true, NotifyConnect: true}} {
			v := newVM(t, cfg)
			for name, nr := range common {
				if got := v.run(t, nr, 0xffffffffffffffff, 2, 3, 4, 5, 6); got != allow {
					t.Errorf("%v %s(%d) = %s, want ALLOW", arch, name, nr, retName(got))
				}
			}
		}
	}
}

// model is the expected outcome for nr with all-zero arguments, computed
// from the rule lists without the decision tree.
func model(cfg plan.Seccomp, table map[string]uint32, nr uint32) uint32 {
	if cfg.Arch == AMD64 && nr&x32Bit != 0 {
		return kill
	}
	name := ""
	for n, v := range table {
		if v == nr {
			name = n
		}
	}
	switch {
	case name == "":
		return allow
	case slices.Contains(epermCalls, name):
		return eperm
	case slices.Contains(enosysCalls, name):
		return enosys
	case name == "socket" || name == "socketpair":
		return eafnosupport // domain 0 is AF_UNSPEC
	case name == "connect" && cfg.NotifyConnect:
		return notif
	case slices.Contains(metadataCalls, name) && cfg.NotifyMetadata:
		return notif
	case name == "openat2":
		return enosys
	case name == "truncate" && cfg.NotifyTruncate, slices.Contains(renameCalls, name) && cfg.NotifyRename:
		return notif
	case (name == "clone" || slices.Contains(forkCalls, name)) && cfg.NotifyFork:
		return notif // clone flags 0: no namespace
	}
	if r, ok := procModel(cfg, name); ok {
		return r
	}
	return allow // ioctl cmd 0, clone flags 0, personality 0, notify off
}

// TestSweep runs every syscall number through the decision tree.
func TestSweep(t *testing.T) {
	for _, arch := range arches {
		for _, cfg := range []plan.Seccomp{{Arch: arch}, {Arch: arch, NotifyMetadata: true, NotifyConnect: true},
			{Arch: arch, NotifyProcTargets: true}, {Arch: arch, NotifyMetadata: true, NotifyProcTargets: true, NotifySignals: true},
			{Arch: arch, NotifyMetadata: true, NotifyConnect: true, NotifyTruncate: true, NotifyRename: true},
			{Arch: arch, NotifyFork: true}} {
			v := newVM(t, cfg)
			nrs := []uint32{0x3fffffff, 0x40000000, 0x7fffffff, 0x80000000, 0xfffffffe, 0xffffffff}
			for nr := uint32(0); nr < 1100; nr++ {
				nrs = append(nrs, nr)
			}
			for _, nr := range nrs {
				want := model(cfg, v.table, nr)
				if got := v.run(t, nr); got != want {
					t.Errorf("%+v nr %d = %s, want %s", cfg, nr, retName(got), retName(want))
				}
			}
		}
	}
}

// condJump is the offset a conditional jump (BPF_JMP|{JEQ,JGE,JGT,JSET}|
// BPF_K) adds to pc when the accumulator holds a: Jf for any other
// instruction.
func condJump(in bpf.RawInstruction, a uint32) int {
	var res bool
	switch in.Op {
	case 0x15:
		res = a == in.K
	case 0x35:
		res = a >= in.K
	case 0x25:
		res = a > in.K
	case 0x45:
		res = a&in.K != 0
	}
	if res {
		return int(in.Jt)
	}
	return int(in.Jf)
}

// constAllow mirrors the kernel's seccomp_is_const_allow() (kernel/seccomp.c,
// 5.11+): when attaching a filter, the kernel emulates it for each syscall
// nr with only nr and arch known and, if the result is ALLOW without
// reading anything else, skips the filter for that nr from then on.
func constAllow(prog []bpf.RawInstruction, arch, nr uint32) bool {
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Op {
		case 0x20: // BPF_LD|BPF_W|BPF_ABS
			switch in.K {
			case offNr:
				a = nr
			case offArch:
				a = arch
			default:
				return false
			}
		case 0x06: // BPF_RET|BPF_K
			return in.K == unix.SECCOMP_RET_ALLOW
		case 0x05: // BPF_JMP|BPF_JA
			pc += int(in.K)
		case 0x15, 0x35, 0x25, 0x45: // BPF_JMP|{JEQ,JGE,JGT,JSET}|BPF_K
			pc += condJump(in, a)
		case 0x54: // BPF_ALU|BPF_AND|BPF_K
			a &= in.K
		default:
			return false
		}
	}
	return false
}

// TestKernelActionCache checks the property that makes unlisted syscalls
// free: the kernel's action cache can prove them ALLOW, while every listed
// syscall is still evaluated.
func TestKernelActionCache(t *testing.T) {
	for _, arch := range arches {
		cfg := plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true}
		raw, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		audit, table, _ := archInfo(arch)
		listed := map[uint32]bool{}
		es, _ := entries(cfg)
		for _, e := range es {
			listed[e.nr] = true
		}
		for nr := uint32(0); nr < 600; nr++ {
			got := constAllow(raw, audit, nr)
			if want := !listed[nr]; got != want {
				t.Errorf("%v nr %d: cached as always-allowed = %v, want %v", arch, nr, got, want)
			}
		}
		if len(listed) != len(es) || len(es) > len(table) {
			t.Errorf("%v: %d entries, %d distinct numbers", arch, len(es), len(listed))
		}
	}
}

// argFree are syscalls the filter must decide by nr alone: no rule names
// them, by design (the package comment: read, write, mmap, futex ... cost
// nothing), and programs issue them in hot loops. The kernel can only skip
// the filter for them if constAllow holds. openat is not among them: its
// creation mode (and, on Landlock ABI < 3, its O_TRUNC) is checked.
var argFree = []string{
	"getppid", "getpid", "read", "write", "close", "fstat", "newfstatat",
	"futex", "mmap", "brk", "rseq",
}

// TestArgumentFreeCallsCached pins the action-cache property by name, for
// every plan.Seccomp the launcher can build: if a rule (or a prologue change,
// e.g. an argument load before the dispatch on nr) made one of these calls
// run the filter again, each call would pay for the BPF program.
func TestArgumentFreeCallsCached(t *testing.T) {
	for _, arch := range arches {
		common := commonAMD64
		if arch == ARM64 {
			common = commonARM64
		}
		audit, _, _ := archInfo(arch)
		for _, notify := range []bool{false, true} {
			for _, dgram := range []bool{false, true} {
				cfg := plan.Seccomp{Arch: arch, NotifyMetadata: notify, NotifyConnect: notify, AllowUnixDgram: dgram}
				raw, err := Build(cfg)
				if err != nil {
					t.Fatal(err)
				}
				for _, name := range argFree {
					nr, ok := common[name]
					if !ok {
						t.Fatalf("%v: no number for %s", arch, name)
					}
					if !constAllow(raw, audit, nr) {
						t.Errorf("%+v: %s (%d) is not provably ALLOW from nr and arch alone", cfg, name, nr)
					}
				}
				// The emulator must not prove too much: foreign
				// arches and x32 numbers always run the filter.
				if constAllow(raw, audit^1, common["getppid"]) {
					t.Errorf("%+v: a foreign arch is const-allow", cfg)
				}
				if arch == AMD64 && constAllow(raw, audit, common["getppid"]|x32Bit) {
					t.Errorf("%+v: an x32 nr is const-allow", cfg)
				}
			}
		}
	}
}

func TestDenied(t *testing.T) {
	for _, arch := range arches {
		for _, cfg := range []plan.Seccomp{{Arch: arch}, {Arch: arch, NotifyMetadata: true, NotifyConnect: true, AllowUnixDgram: true}} {
			rules, err := Denied(cfg)
			if err != nil {
				t.Fatal(err)
			}
			v := newVM(t, cfg)
			byName := map[string][]Rule{}
			for _, r := range rules {
				if r.Nr != v.table[r.Syscall] {
					t.Errorf("%v: rule %v has nr %d, table says %d", arch, r, r.Nr, v.table[r.Syscall])
				}
				byName[r.Syscall] = append(byName[r.Syscall], r)
				// Unconditional rules must be what the filter does.
				if r.When == "" {
					want := errno(r.Errno)
					if r.Notify {
						want = notif
					}
					if got := v.run(t, r.Nr, 1, 2, 3); got != want {
						t.Errorf("%v: rule %q but filter says %s", arch, r, retName(got))
					}
				}
			}
			if !slices.IsSortedFunc(rules, func(a, b Rule) int { return strings.Compare(a.Syscall, b.Syscall) }) {
				t.Errorf("%v: rules not sorted", arch)
			}
			for _, name := range []string{"socket", "socketpair", "ioctl", "clone", "personality", "clone3", "ptrace"} {
				if len(byName[name]) == 0 {
					t.Errorf("%v: no rule for %s", arch, name)
				}
			}
			wantSock := 3
			if cfg.AllowUnixDgram {
				wantSock = 2
			}
			if len(byName["socket"]) != wantSock {
				t.Errorf("%+v: socket rules %v", cfg, byName["socket"])
			}
			_, notifyChmod := byName["fchmod"]
			_, notifyConnect := byName["connect"]
			if notifyChmod != cfg.NotifyMetadata || notifyConnect != cfg.NotifyConnect {
				t.Errorf("%+v: fchmod listed %v, connect listed %v", cfg, notifyChmod, notifyConnect)
			}
		}
	}
	rules, _ := Denied(plan.Seccomp{Arch: AMD64})
	for _, r := range rules {
		if r.Syscall == "socket" && r.Errno == unix.EAFNOSUPPORT {
			if s := r.String(); s != "socket if domain != AF_UNIX: EAFNOSUPPORT (address family not supported by protocol)" {
				t.Errorf("String() = %q", s)
			}
		}
	}
}

// TestMissingNames catches typos in the rule lists: a name that no table
// knows would silently produce no rule.
func TestMissingNames(t *testing.T) {
	var all []string
	all = append(all, epermCalls...)
	all = append(all, enosysCalls...)
	for _, c := range notifiedCalls {
		all = append(all, c.names...)
	}
	for _, c := range procCalls {
		if c.action != procNone {
			all = append(all, c.name)
		}
	}
	all = append(all, sigchldEntry().name)
	for _, e := range argRules(plan.Seccomp{}) {
		all = append(all, e.name)
	}
	for _, e := range fileRules(plan.Seccomp{NotifyTruncate: true, NotifyRename: true, NotifyCreate: true, NotifyGuardTree: true}) {
		all = append(all, e.name)
	}
	want := map[plan.Arch][]string{
		AMD64: nil,
		ARM64: {"chmod", "chown", "creat", "fork", "futimesat", "ioperm", "iopl", "lchown", "link", "mkdir", "mknod", "modify_ldt", "open", "rename", "rmdir", "symlink", "unlink", "uselib", "utime", "utimes", "vfork"},
	}
	for _, arch := range arches {
		_, table, _ := archInfo(arch)
		var missing []string
		for _, n := range all {
			if _, ok := table[n]; !ok {
				missing = append(missing, n)
			}
		}
		slices.Sort(missing)
		if !slices.Equal(missing, want[arch]) {
			t.Errorf("%v: names without a number: %v, want %v", arch, missing, want[arch])
		}
		// Every table entry is used by some rule.
		for n := range table {
			if !slices.Contains(all, n) {
				t.Errorf("%v: table entry %s is unused", arch, n)
			}
		}
	}
}

func TestBuildErrors(t *testing.T) {
	for _, a := range []plan.Arch{"", "386", "riscv64"} {
		if _, err := Build(plan.Seccomp{Arch: a}); err == nil {
			t.Errorf("Build(Arch %v) succeeded", a)
		}
		if _, err := Denied(plan.Seccomp{Arch: a}); err == nil {
			t.Errorf("Denied(Arch %v) succeeded", a)
		}
	}
	if a, err := NativeArch(); err != nil || (a != AMD64 && a != ARM64) {
		t.Errorf("NativeArch() = %v, %v", a, err)
	}
}

// TestProgramShape checks properties the kernel's checker and the notes in
// the package doc rely on.
func TestProgramShape(t *testing.T) {
	for _, arch := range arches {
		cfg := plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true}
		raw, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		prog, _ := bpf.Disassemble(raw)
		audit, _, _ := archInfo(arch)
		t.Logf("%v: %d instructions", arch, len(raw))
		for i, in := range prog {
			// seccomp accepts only 32-bit absolute loads inside
			// seccomp_data.
			if ld, ok := in.(bpf.LoadAbsolute); ok && (ld.Size != 4 || ld.Off%4 != 0 || ld.Off >= 64) {
				t.Errorf("%v: insn %d: bad load %v", arch, i, ld)
			}
			// Argument loads read low words only.
			if ld, ok := in.(bpf.LoadAbsolute); ok && ld.Off >= offArgs && (ld.Off-offArgs)%8 != 0 {
				t.Errorf("%v: insn %d loads a high argument word: %v", arch, i, ld)
			}
		}
		if _, ok := prog[len(prog)-1].(bpf.RetConstant); !ok {
			t.Errorf("%v: last instruction is %v", arch, prog[len(prog)-1])
		}
		// Decision depth for an unlisted syscall: the tree keeps it
		// small (the kernel's cache then removes it altogether).
		for name, nr := range map[plan.Arch]map[string]uint32{AMD64: commonAMD64, ARM64: commonARM64}[arch] {
			if d := depth(raw, audit, nr); d > 15 {
				t.Errorf("%v: %s takes %d instructions", arch, name, d)
			}
		}
	}
}

// depth counts the instructions executed for nr under arch audit, for
// paths that read only nr and arch.
func depth(prog []bpf.RawInstruction, audit, nr uint32) int {
	n := 0
	var a uint32
	for pc := 0; pc < len(prog); pc++ {
		n++
		in := prog[pc]
		switch in.Op {
		case 0x20:
			switch in.K {
			case offNr:
				a = nr
			case offArch:
				a = audit
			default:
				return n + 100 // not on the arch/nr-only path
			}
		case 0x06:
			return n
		case 0x05:
			pc += int(in.K)
		default:
			pc += condJump(in, a)
		}
	}
	return n
}

// TestAssemblerFarJumps forces conditional jumps beyond 255 instructions.
func TestAssemblerFarJumps(t *testing.T) {
	a := newAssembler()
	far := a.newLabel()
	farF := a.newLabel()
	a.loadWord(offNr)
	a.jumpIf(bpf.JumpEqual, 7, far, next)
	a.jumpIf(bpf.JumpEqual, 8, next, farF)
	for range 300 {
		a.loadWord(offArch)
	}
	a.insn(bpf.RetConstant{Val: 8})
	a.mark(far)
	a.insn(bpf.RetConstant{Val: 7})
	a.mark(farF)
	a.jumpIf(bpf.JumpEqual, 9, a.ret(9), a.ret(10))
	prog, err := a.program()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bpf.Assemble(prog); err != nil {
		t.Fatal(err)
	}
	m, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	for nr, want := range map[uint32]int{7: 7, 8: 8, 9: 9, 10: 10, 0: 10} {
		got, err := m.Run(seccompData(0, nr, [6]uint64{}))
		if err != nil || got != want {
			t.Errorf("nr %d: got %d, %v; want %d", nr, got, err, want)
		}
	}
}

func BenchmarkFilterVM(b *testing.B) {
	v := newVM(b, plan.Seccomp{Arch: AMD64, NotifyMetadata: true, NotifyConnect: true})
	in := seccompData(v.audit, 257, [6]uint64{}) // openat
	b.ResetTimer()
	for b.Loop() {
		if _, err := v.m.Run(in); err != nil {
			b.Fatal(err)
		}
	}
}
