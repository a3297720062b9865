//go:build linux

package seccomp

import (
	"os"
	"testing"
	"unsafe"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// helperProc installs the process rules (with a listener it then closes,
// so that every notified call fails with ENOSYS) and checks what the
// kernel makes of each form: decided by the filter alone, or routed.
func helperProc(t *testing.T, arch plan.Arch) {
	prog, err := Build(plan.Seccomp{Arch: arch, NotifyProcTargets: true, NotifySignals: true})
	if err != nil {
		t.Fatal(err)
	}
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	setNoNewPrivs(t)
	lfd, err := Install(prog, true)
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lfd)
	self := uintptr(os.Getpid())
	var lim unix.Rlimit
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	owner := struct{ typ, pid int32 }{0, int32(self)}
	cases := []struct {
		name string
		nr   uintptr
		args []uintptr
		want unix.Errno
	}{
		// The caller itself, by 0: decided by the filter, allowed.
		{"prlimit64(0, get)", unix.SYS_PRLIMIT64, []uintptr{0, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim))}, 0},
		{"setpriority(PRIO_PROCESS, 0)", unix.SYS_SETPRIORITY, []uintptr{prioProcess, 0, 0}, 0},
		{"setpriority(PRIO_PGRP, 0)", unix.SYS_SETPRIORITY, []uintptr{prioPgrp, 0, 0}, 0},
		{"ioprio_set(WHO_PROCESS, 0)", unix.SYS_IOPRIO_SET, []uintptr{ioprioWhoProcess, 0, 0}, 0},
		{"sched_setaffinity(0)", unix.SYS_SCHED_SETAFFINITY, []uintptr{0, unsafe.Sizeof(set), uintptr(unsafe.Pointer(&set))}, 0},
		{"kill(0, 0)", unix.SYS_KILL, []uintptr{0, 0}, 0},
		{"fcntl(F_SETOWN, 0)", unix.SYS_FCNTL, []uintptr{uintptr(p[0]), unix.F_SETOWN, 0}, 0},
		{"fcntl(F_GETFL)", unix.SYS_FCNTL, []uintptr{uintptr(p[0]), unix.F_GETFL}, 0},
		// Refused by the filter.
		{"setpriority(PRIO_USER, 0)", unix.SYS_SETPRIORITY, []uintptr{prioUser, 0, 0}, unix.EPERM},
		{"setpriority(PRIO_PGRP, 1)", unix.SYS_SETPRIORITY, []uintptr{prioPgrp, 1, 0}, unix.EPERM},
		{"ioprio_set(WHO_USER, 0)", unix.SYS_IOPRIO_SET, []uintptr{ioprioWhoUser, 0, 0}, unix.EPERM},
		{"process_mrelease", unix.SYS_PROCESS_MRELEASE, []uintptr{3, 0}, unix.EPERM},
		{"fcntl(F_SETOWN_EX)", unix.SYS_FCNTL, []uintptr{uintptr(p[0]), unix.F_SETOWN_EX, uintptr(unsafe.Pointer(&owner))}, unix.EPERM},
		{"ioctl(FIOSETOWN)", unix.SYS_IOCTL, []uintptr{uintptr(p[0]), fioSetown, uintptr(unsafe.Pointer(&owner.pid))}, unix.EPERM},
		// Routed to the (closed) listener, even naming the caller.
		{"prlimit64(getpid(), get)", unix.SYS_PRLIMIT64, []uintptr{self, unix.RLIMIT_NOFILE, 0, uintptr(unsafe.Pointer(&lim))}, unix.ENOSYS},
		{"setpriority(PRIO_PROCESS, 1)", unix.SYS_SETPRIORITY, []uintptr{prioProcess, 1, 0}, unix.ENOSYS},
		{"kill(1, 0)", unix.SYS_KILL, []uintptr{1, 0}, unix.ENOSYS},
		{"tgkill(getpid(), gettid(), 0)", unix.SYS_TGKILL, []uintptr{self, uintptr(unix.Gettid()), 0}, unix.ENOSYS},
		{"fcntl(F_SETOWN, getpid())", unix.SYS_FCNTL, []uintptr{uintptr(p[0]), unix.F_SETOWN, self}, unix.ENOSYS},
		{"pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL, []uintptr{3, 0, 0, 0}, unix.ENOSYS},
	}
	for _, c := range cases {
		_, e := call(c.nr, c.args...)
		if e != c.want {
			t.Errorf("%s = %v, want %v", c.name, e, c.want)
		}
	}
}
