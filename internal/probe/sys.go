//go:build linux

package probe

import (
	"bytes"
	"encoding/binary"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A Go process is always multi-threaded, and unshare(CLONE_NEWUSER) refuses
// multi-threaded callers (EINVAL). The user-namespace vectors therefore
// create the namespace while starting a re-executed copy of the probe
// ("__userns-check"), which then confirms from the inside that it really is
// in a new user namespace:
//
//	userns          fork, then unshare(CLONE_NEWUSER) in the single-threaded child
//	clone-newuser   clone(CLONE_NEWUSER|SIGCHLD)
//	clone3-newuser  clone3(CLONE_NEWUSER|CLONE_NEWTIME) (CLONE_NEWTIME makes Go
//	                use clone3, whose flags a seccomp filter cannot inspect)

func vUserns([]string) result {
	return newUserns("unshare(CLONE_NEWUSER)", &syscall.SysProcAttr{Unshareflags: unix.CLONE_NEWUSER})
}

func vCloneNewuser([]string) result {
	return newUserns("clone(CLONE_NEWUSER)", &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER})
}

func vClone3Newuser([]string) result {
	return newUserns("clone3(CLONE_NEWUSER|CLONE_NEWTIME)",
		&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWTIME})
}

func newUserns(what string, sys *syscall.SysProcAttr) result {
	exe, err := selfPath()
	if err != nil {
		return blocked("find own executable for "+what, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := selfCommand(exe, hiddenUsernsCheck)
	cmd.SysProcAttr = sys
	cmd.Stdin = bytes.NewReader(nil)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return blocked(what, err)
	}
	_ = cmd.Wait()
	if r, ok := parseReport(stdout.Bytes()); ok {
		if r.outcome == outEscaped {
			r.detail = what + " succeeded: " + r.detail
		} else {
			r.detail = what + ": " + r.detail
		}
		return r
	}
	return blockedf("%s: child started but did not report (%s; %s)", what, cmd.ProcessState, lastLine(stderr.String()))
}

// usernsCheck runs in the child: with no uid map written, a process in a
// fresh user namespace sees itself as the overflow uid, and its uid_map is
// empty.
func usernsCheck() int {
	uid := os.Getuid()
	overflow := 65534
	if b, err := os.ReadFile("/proc/sys/kernel/overflowuid"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			overflow = v
		}
	}
	uidMap, mapErr := os.ReadFile("/proc/self/uid_map")
	switch {
	case mapErr == nil && len(bytes.TrimSpace(uidMap)) == 0:
		return report(hiddenUsernsCheck, escaped("child is in a new user namespace (empty uid_map, uid %d)", uid))
	case mapErr == nil:
		return report(hiddenUsernsCheck, blockedf("child's uid_map is %q: not a new user namespace", strings.TrimSpace(string(uidMap))))
	case uid == overflow:
		return report(hiddenUsernsCheck, escaped("child is in a new user namespace (uid %d = overflow uid)", uid))
	default:
		return report(hiddenUsernsCheck, blockedf("child has uid %d: not a new user namespace", uid))
	}
}

func vMount(args []string) result {
	dir := args[0]
	if err := unix.Mount("none", dir, "tmpfs", 0, "size=1m"); err != nil {
		return blocked("mount tmpfs on "+dir, err)
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return escaped("mounted tmpfs on %s (unmount: %s)", dir, errString(err))
	}
	return escaped("mounted (and unmounted) tmpfs on %s", dir)
}

func vKeyctl([]string) result {
	id, err := unix.AddKey("user", "confine", []byte("x"), unix.KEY_SPEC_PROCESS_KEYRING)
	if err != nil {
		return blocked("add_key(user, confine)", err)
	}
	_, _ = unix.KeyctlInt(unix.KEYCTL_INVALIDATE, id, 0, 0, 0)
	return escaped("add_key created key %d in the process keyring", id)
}

// bpf(2) commands and types used by vBPF.
const (
	bpfMapCreate          = 0
	bpfProgLoad           = 5
	bpfMapTypeArray       = 2
	bpfProgTypeSocketFilt = 1
	bpfAttrSize           = 128
)

// vBPF loads the trivial socket filter "r0 = 0; exit"; if that fails it
// tries to create a one-entry array map. Either reaching the kernel's BPF
// objects is the escape.
func vBPF([]string) result {
	ne := binary.NativeEndian
	insns := make([]byte, 16)
	insns[0] = 0xb7 // BPF_ALU64 | BPF_MOV | BPF_K: r0 = 0
	insns[8] = 0x95 // BPF_JMP | BPF_EXIT
	license := []byte("GPL\x00")
	attr := make([]byte, bpfAttrSize)
	ne.PutUint32(attr[0:], bpfProgTypeSocketFilt)
	ne.PutUint32(attr[4:], 2) // insn_cnt
	ne.PutUint64(attr[8:], uint64(uintptr(unsafe.Pointer(&insns[0]))))
	ne.PutUint64(attr[16:], uint64(uintptr(unsafe.Pointer(&license[0]))))
	fd, _, e := unix.Syscall(unix.SYS_BPF, bpfProgLoad, uintptr(unsafe.Pointer(&attr[0])), bpfAttrSize)
	runtime.KeepAlive(insns)
	runtime.KeepAlive(license)
	runtime.KeepAlive(attr)
	if e == 0 {
		unix.Close(int(fd))
		return escaped("BPF_PROG_LOAD loaded a socket filter (fd %d)", fd)
	}
	progErr := e

	attr = make([]byte, bpfAttrSize)
	ne.PutUint32(attr[0:], bpfMapTypeArray)
	ne.PutUint32(attr[4:], 4)  // key_size
	ne.PutUint32(attr[8:], 4)  // value_size
	ne.PutUint32(attr[12:], 1) // max_entries
	fd, _, e = unix.Syscall(unix.SYS_BPF, bpfMapCreate, uintptr(unsafe.Pointer(&attr[0])), bpfAttrSize)
	runtime.KeepAlive(attr)
	if e == 0 {
		unix.Close(int(fd))
		return escaped("BPF_PROG_LOAD: %s; BPF_MAP_CREATE created an array map (fd %d)", errString(progErr), fd)
	}
	return blockedf("BPF_PROG_LOAD: %s; BPF_MAP_CREATE: %s", errString(progErr), errString(e))
}

func vPerf([]string) result {
	attr := unix.PerfEventAttr{
		Type:   unix.PERF_TYPE_SOFTWARE,
		Config: unix.PERF_COUNT_SW_CPU_CLOCK,
		Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
		Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
	}
	fd, err := unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC)
	if err != nil {
		return blocked("perf_event_open(cpu-clock, self)", err)
	}
	unix.Close(fd)
	return escaped("perf_event_open(cpu-clock, self) returned fd %d", fd)
}

// uffdUserModeOnly is UFFD_USER_MODE_ONLY.
const uffdUserModeOnly = 1

func vUserfaultfd([]string) result {
	fd, _, e := unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK, 0, 0)
	if e == 0 {
		unix.Close(int(fd))
		return escaped("userfaultfd(0) returned fd %d", fd)
	}
	first := e
	fd, _, e = unix.Syscall(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|unix.O_NONBLOCK|uffdUserModeOnly, 0, 0)
	if e == 0 {
		unix.Close(int(fd))
		return escaped("userfaultfd(0): %s; userfaultfd(UFFD_USER_MODE_ONLY) returned fd %d", errString(first), fd)
	}
	return blockedf("userfaultfd(0): %s; userfaultfd(UFFD_USER_MODE_ONLY): %s", errString(first), errString(e))
}
