//go:build linux

package testutil

import (
	"encoding/binary"
	"runtime"
	"testing"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The simulated container's filter, run in the BPF VM: namespaces refused
// and pidfd_getfd refused as by Docker's default profile (without
// CAP_SYS_PTRACE), everything else allowed.
func TestContainerFilter(t *testing.T) {
	prog, err := ContainerFilter()
	if err != nil {
		t.Fatal(err)
	}
	insns := make([]bpf.Instruction, len(prog))
	for i, r := range prog {
		insns[i] = r.Disassemble()
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatal(err)
	}
	arch := uint32(unix.AUDIT_ARCH_X86_64)
	if runtime.GOARCH == "arm64" {
		arch = unix.AUDIT_ARCH_AARCH64
	}
	// The VM decodes 32-bit loads big-endian, the kernel natively: each
	// word is written big-endian so that both read the same value.
	data := func(nr, arch uint32, arg0 uint64) []byte {
		b := make([]byte, 64)
		binary.BigEndian.PutUint32(b[0:], nr)
		binary.BigEndian.PutUint32(b[4:], arch)
		binary.BigEndian.PutUint32(b[16:], uint32(arg0))
		binary.BigEndian.PutUint32(b[20:], uint32(arg0>>32))
		return b
	}
	const (
		allow = unix.SECCOMP_RET_ALLOW
		eperm = unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)
		nosys = unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)
	)
	tests := []struct {
		name string
		in   []byte
		want uint32
	}{
		{"unshare", data(unix.SYS_UNSHARE, arch, unix.CLONE_NEWUSER), eperm},
		{"setns", data(unix.SYS_SETNS, arch, 0), eperm},
		{"pidfd_getfd", data(unix.SYS_PIDFD_GETFD, arch, 0), eperm},
		{"clone3", data(unix.SYS_CLONE3, arch, 0), nosys},
		{"clone newuser", data(unix.SYS_CLONE, arch, unix.CLONE_NEWUSER|uint64(unix.SIGCHLD)), eperm},
		{"clone newpid", data(unix.SYS_CLONE, arch, unix.CLONE_NEWPID), eperm},
		{"clone newnet", data(unix.SYS_CLONE, arch, unix.CLONE_NEWNET), eperm},
		{"clone fork", data(unix.SYS_CLONE, arch, uint64(unix.SIGCHLD)), allow},
		{"clone vfork", data(unix.SYS_CLONE, arch, unix.CLONE_VFORK|unix.CLONE_VM|uint64(unix.SIGCHLD)), allow},
		{"clone thread", data(unix.SYS_CLONE, arch, unix.CLONE_VM|unix.CLONE_FS|unix.CLONE_FILES|unix.CLONE_SIGHAND|unix.CLONE_THREAD), allow},
		{"getpid", data(unix.SYS_GETPID, arch, 0), allow},
		{"foreign arch", data(unix.SYS_UNSHARE, 0x40000003, 0), allow},
	}
	for _, tt := range tests {
		got, err := vm.Run(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if uint32(got) != tt.want {
			t.Errorf("%s: %#x, want %#x", tt.name, got, tt.want)
		}
	}
}
