package probe

import (
	"os"
	"strings"
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

// TestForeignABIDeathIsBlocked checks that a child killed (or trapped) by
// seccomp for using the i386 or x32 ABI is reported as blocked.
func TestForeignABIDeathIsBlocked(t *testing.T) {
	for _, mode := range []string{"kill", "trap"} {
		for _, args := range [][]string{{"socketcall32", "1"}, {"x32-syscall"}} {
			t.Run(mode+"/"+args[0], func(t *testing.T) {
				t.Setenv(seccompEnv, mode)
				rep, code := runProbe(t, nil, args...)
				if code != exitBlocked || !strings.Contains(rep.Detail, "SIGSYS") {
					t.Fatalf("got %d %+v, want blocked by SIGSYS", code, rep)
				}
			})
		}
	}
}
