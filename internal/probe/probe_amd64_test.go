//go:build linux

package probe

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// seccompEnv makes the test binary, acting as the probe, confine itself
// first with a filter that treats every non-x86_64 system call (i386 via
// INT $0x80, x32 via the 0x40000000 bit) with the given action, as a
// sandbox's seccomp filter would.
const seccompEnv = "CONFINE_PROBE_TEST_SECCOMP"

func init() {
	switch os.Getenv(seccompEnv) {
	case "kill":
		installForeignABIFilter(unix.SECCOMP_RET_KILL_PROCESS)
	case "trap":
		installForeignABIFilter(unix.SECCOMP_RET_TRAP)
	}
}

func installForeignABIFilter(action uint32) {
	const auditArchX86_64 = 0xc000003e
	prog := []unix.SockFilter{
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 4}, // seccomp_data.arch
		{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: auditArchX86_64, Jt: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: action},
		{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: 0}, // seccomp_data.nr
		{Code: unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K, K: x32SyscallBit, Jf: 1},
		{Code: unix.BPF_RET | unix.BPF_K, K: action},
		{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW},
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		panic(err)
	}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		panic(e)
	}
}

// foreignABICases are the foreign-ABI vectors. needsGate: the vector enters
// the kernel through an entry a host can lack (INT $0x80 with IA32
// emulation off faults before seccomp sees the call), so an unfiltered
// control must show the entry works before a filtered run can be judged.
// The x32 bit is seen by seccomp on every x86_64 kernel, whether or not x32
// is enabled (the kernel's ENOSYS comes after the filter), so it needs none.
var foreignABICases = []struct {
	args      []string
	needsGate bool
}{
	{[]string{"socketcall32", "1"}, true},
	{[]string{"x32-syscall"}, false},
}

// foreignABISkip decides from the unfiltered control whether a filtered run
// of the vector can be judged on this host: "" if it can, else the reason
// to skip. Only a control that says the entry itself is missing (n/a from
// a gate vector) makes it inapplicable; an escape or an errno both show that
// the kernel was reached.
func foreignABISkip(needsGate bool, control probeReport, code int) string {
	if needsGate && (code == exitNA || control.Outcome == outNA) {
		return "not applicable on this host: the unfiltered control could not enter the kernel: " + control.Detail
	}
	return ""
}

func TestForeignABISkip(t *testing.T) {
	cases := []struct {
		name      string
		needsGate bool
		control   probeReport
		code      int
		skip      bool
	}{
		{"gate works, socket made", true, probeReport{Outcome: outEscaped, Detail: "i386 socketcall(SYS_SOCKET) returned fd 7"}, exitEscaped, false},
		{"gate works, kernel refused", true, probeReport{Outcome: outBlocked, Detail: "i386 socketcall(SYS_SOCKET): EAFNOSUPPORT"}, exitBlocked, false},
		{"gate missing (SIGSEGV)", true, probeReport{Outcome: outNA, Detail: "INT $0x80 faulted (the child crashed with SIGSEGV)"}, exitNA, true},
		{"x32 disabled: still seen by seccomp", false, probeReport{Outcome: outNA, Detail: "x32 socket: ENOSYS"}, exitNA, false},
		{"x32 enabled", false, probeReport{Outcome: outEscaped}, exitEscaped, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := foreignABISkip(c.needsGate, c.control, c.code)
			if (got != "") != c.skip {
				t.Fatalf("foreignABISkip = %q, want skip %v", got, c.skip)
			}
		})
	}
}

// TestGateMissing walks the reading of an isolated child's death: only a
// SIGSEGV right after the gate marker, in a gate vector, is "no gate".
func TestGateMissing(t *testing.T) {
	const exit2 = syscall.WaitStatus(2 << 8)
	const sigsegv = syscall.WaitStatus(syscall.SIGSEGV)
	const sigsys = syscall.WaitStatus(syscall.SIGSYS)
	goCrash := gateMarker + "\npanic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV: segmentation violation code=0x80 addr=0x0 pc=0x4a1b2c]\n"
	cases := []struct {
		name, vector, stderr string
		ws                   syscall.WaitStatus
		na                   bool
	}{
		{"go runtime crash after the marker", "socketcall32", goCrash, exit2, true},
		{"killed by SIGSEGV after the marker", "socketcall32", gateMarker + "\n", sigsegv, true},
		{"seccomp kill (SIGSYS)", "socketcall32", gateMarker + "\n", sigsys, false},
		{"seccomp trap crash (SIGSYS)", "socketcall32", gateMarker + "\nSIGSYS: bad system call\n", exit2, false},
		{"SIGSEGV before the marker", "socketcall32", "[signal SIGSEGV: segmentation violation]\n", exit2, false},
		{"not a gate vector", "x32-syscall", goCrash, exit2, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, ok := gateMissing(c.vector, c.stderr, c.ws)
			if ok != c.na || (ok && r.outcome != outNA) {
				t.Fatalf("gateMissing = %+v, %v; want n/a %v", r, ok, c.na)
			}
		})
	}
}

// TestForeignABIDeathIsBlocked checks that a child killed (or trapped) by
// seccomp for using the i386 or x32 ABI is reported as blocked. Each vector
// first runs unfiltered (the control): where the host has no i386 gate the
// filter can never see the call, and the case is skipped with the reason.
func TestForeignABIDeathIsBlocked(t *testing.T) {
	for _, fc := range foreignABICases {
		ctl, code := runProbe(t, nil, fc.args...)
		skip := foreignABISkip(fc.needsGate, ctl, code)
		for _, mode := range []string{"kill", "trap"} {
			t.Run(mode+"/"+fc.args[0], func(t *testing.T) {
				t.Logf("unfiltered control: exit %d, %s: %s", code, ctl.Outcome, ctl.Detail)
				if skip != "" {
					t.Skip(skip)
				}
				t.Setenv(seccompEnv, mode)
				rep, code := runProbe(t, nil, fc.args...)
				if code != exitBlocked || !strings.Contains(rep.Detail, "SIGSYS") {
					t.Fatalf("got %d %+v, want blocked by SIGSYS", code, rep)
				}
			})
		}
	}
}
