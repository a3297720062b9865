//go:build linux

package testutil

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// SimulateContainerEnv, set to 1 in the environment of `go test`, runs
// every CLI a test starts (and, in packages that run confine in-process,
// the whole test binary) as if inside a stock Docker container: under a
// seccomp filter that refuses namespaces the way Docker's default profile
// does (see ContainerFilter). confine must then select the core provider
// and still enforce every guarantee.
const SimulateContainerEnv = "CONFINE_TEST_SIMULATE_CONTAINER"

// wrapEnv is how a process is told to put itself under the filter: "1"
// means install it and re-exec; "done" marks a process already under it.
const wrapEnv = "CONFINE_TEST_CONTAINER_WRAP"

// SimulatingContainer reports whether this test run simulates a container.
func SimulatingContainer() bool { return os.Getenv(SimulateContainerEnv) == "1" }

// Mode names the mode the tests run in, for logs.
func Mode() string {
	m := "host"
	if SimulatingContainer() {
		m = "simulated container (user namespaces blocked)"
	}
	if ViaServer() {
		m += ", every run through confine serve"
	}
	return m
}

// WrapContainer must be the first thing a TestMain does. In a process
// asked to (wrapEnv=1: a CLI started by CLI.Command in container mode,
// or any test binary when whole is set and the run simulates a
// container) it installs ContainerFilter on the calling thread and
// re-executes the binary from that thread, so that the new image and
// everything it starts run under the filter.
//
// A root process it wraps for the container is first re-executed with
// every cgroup mount read-only (see ReadOnlyCgroupEnv), as Docker mounts
// them, and so is any process whose environment asks for that alone.
func WrapContainer(whole bool) {
	wrapRefusePidfdOpen()
	// Read-only cgroups (no pids cgroup: root runs use the fork count)
	// only where a test asks for them (ReadOnlyCgroupEnv), not for the
	// whole simulated container: a fork that waits for the launcher's
	// decision can fail with EINTR when a signal arrives first (see the
	// known limits in docs/design.md), which shells report as "Cannot fork".
	wrapReadOnlyCgroup(false)
	switch os.Getenv(wrapEnv) {
	case "done":
		return
	case "":
		if !whole || !SimulatingContainer() {
			return
		}
	}
	reexecAfter("simulated container", wrapEnv, installContainerFilter)
}

// reexecAfter runs prepare on this thread, locked to it, and re-executes
// the binary from it with envName=done, so that the new image and all it
// starts keep what prepare did (a seccomp filter, a mount namespace). It
// does not return: a failure exits 125 with what in the message.
func reexecAfter(what, envName string, prepare func() error) {
	runtime.LockOSThread()
	if err := prepare(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(125)
	}
	env := []string{envName + "=done"}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, envName+"=") {
			env = append(env, kv)
		}
	}
	err := syscall.Exec("/proc/self/exe", os.Args, env)
	fmt.Fprintf(os.Stderr, "%s: re-exec: %v\n", what, err)
	os.Exit(125)
}

// auditArch is the AUDIT_ARCH of this binary's GOARCH.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("unsupported GOARCH %s", runtime.GOARCH)
}

// nsFlags are the clone flags Docker's default seccomp profile refuses
// without CAP_SYS_ADMIN.
const nsFlags = unix.CLONE_NEWNS | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
	unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWCGROUP

// ContainerFilter is the part of Docker's default seccomp profile that
// matters to confine: unshare and setns fail with EPERM, clone with any
// CLONE_NEW* flag fails with EPERM, and clone3 (whose flags a filter
// cannot read) with ENOSYS, so that callers fall back to clone. As in
// Docker without CAP_SYS_PTRACE (the profile allows pidfd_getfd only with
// that capability, and its default action is EPERM), pidfd_getfd fails
// with EPERM: the supervisor cannot take the command's descriptors.
// (ptrace, kcmp and process_vm_* belong to the same group but stay
// allowed here: escape tests attack with them unconfined as controls.)
func ContainerFilter() ([]bpf.RawInstruction, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		nosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	// Offsets in struct seccomp_data: nr, arch, ip, args[6]; args[0]'s
	// low word is at 16 on little-endian machines. A jump skips the given
	// number of instructions: the comments name the target.
	return bpf.Assemble([]bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 4, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipFalse: 8}, // -> 10 allow
		/* 2 */ bpf.LoadAbsolute{Off: 0, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 7}, // -> 11 eperm
		/* 4 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SETNS, SkipTrue: 6}, // -> 11 eperm
		/* 5 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PIDFD_GETFD, SkipTrue: 5}, // -> 11 eperm
		/* 6 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipTrue: 5}, // -> 12 nosys
		/* 7 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 2}, // -> 10 allow
		/* 8 */ bpf.LoadAbsolute{Off: 16, Size: 4},
		/* 9 */ bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: nsFlags, SkipTrue: 1}, // -> 11 eperm
		/* 10 */ bpf.RetConstant{Val: allow},
		/* 11 */ bpf.RetConstant{Val: eperm},
		/* 12 */ bpf.RetConstant{Val: nosys},
	})
}

func installContainerFilter() error {
	prog, err := ContainerFilter()
	if err != nil {
		return err
	}
	return installFilter(prog)
}

// installFilter puts the calling thread under prog.
func installFilter(prog []bpf.RawInstruction) error {
	// Without CAP_SYS_ADMIN a filter needs no_new_privs, as in a
	// container started with --security-opt no-new-privileges.
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: (*unix.SockFilter)(unsafe.Pointer(&prog[0]))}
	if _, _, e := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp: %w", e)
	}
	return nil
}

// RefusePidfdOpenEnv, set to 1 in a CLI's environment (CLI.Env), runs
// that CLI (and so everything it starts) under a seccomp filter that
// refuses pidfd_open with EPERM, as Docker's seccomp profiles before 20.10
// do (they do not list it, and their default action is EPERM).
const RefusePidfdOpenEnv = "CONFINE_TEST_REFUSE_PIDFD_OPEN"

// wrapRefusePidfdOpen installs that filter and re-executes the binary
// under it, in a process whose environment asks for it.
func wrapRefusePidfdOpen() {
	if os.Getenv(RefusePidfdOpenEnv) != "1" {
		return
	}
	reexecAfter("refusing pidfd_open", RefusePidfdOpenEnv, func() error {
		prog, err := PidfdOpenFilter()
		if err != nil {
			return err
		}
		return installFilter(prog)
	})
}

// PidfdOpenFilter refuses pidfd_open (EPERM) and allows everything else.
func PidfdOpenFilter() ([]bpf.RawInstruction, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	return bpf.Assemble([]bpf.Instruction{
		/* 0 */ bpf.LoadAbsolute{Off: 4, Size: 4},
		/* 1 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: arch, SkipFalse: 2}, // -> 4 allow
		/* 2 */ bpf.LoadAbsolute{Off: 0, Size: 4},
		/* 3 */ bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_PIDFD_OPEN, SkipTrue: 1}, // -> 5 eperm
		/* 4 */ bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		/* 5 */ bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
	})
}
