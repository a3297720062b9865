//go:build linux && (amd64 || arm64)

package notify

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestQuick walks which calls keep the leader's role while handled: only
// those whose handler reads nothing but /proc (no task memory, socket or
// file system that could block it and with it every other call).
func TestQuick(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nr    int32
		quick bool
	}{
		{"tgkill", unix.SYS_TGKILL, true},
		{"kill", unix.SYS_KILL, true},
		{"tkill", unix.SYS_TKILL, true},
		{"prlimit64", unix.SYS_PRLIMIT64, true},
		{"pidfd_send_signal", unix.SYS_PIDFD_SEND_SIGNAL, true},
		{"clone", unix.SYS_CLONE, true},
		{"rt_sigqueueinfo", unix.SYS_RT_SIGQUEUEINFO, false},
		{"rt_tgsigqueueinfo", unix.SYS_RT_TGSIGQUEUEINFO, false},
		{"rt_sigaction", unix.SYS_RT_SIGACTION, false},
		{"connect", unix.SYS_CONNECT, false},
		{"socket", unix.SYS_SOCKET, false},
		{"renameat2", unix.SYS_RENAMEAT2, false},
		{"truncate", unix.SYS_TRUNCATE, false},
		{"utimensat", unix.SYS_UTIMENSAT, false},
		{"fchmodat", unix.SYS_FCHMODAT, false},
	} {
		ent, ok := sysTable[tc.nr]
		if !ok {
			t.Errorf("%s: not in sysTable", tc.name)
			continue
		}
		if got := quick(ent.kind); got != tc.quick {
			t.Errorf("quick(%s) = %v, want %v", tc.name, got, tc.quick)
		}
	}
}

// TestOwnGroup: ownGroup accepts only the caller's thread group id, never
// another thread's id in the group nor another process.
func TestOwnGroup(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := &task{tid: unix.Gettid()}
	other := make(chan int)
	release := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		other <- unix.Gettid()
		<-release
	}()
	sibling := <-other
	defer close(release)
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { child.Process.Kill(); child.Wait() }()
	for _, c := range []struct {
		name string
		task *task
		x    int
		want bool
	}{
		{"own group", me, os.Getpid(), true},
		{"own group from another thread", &task{tid: sibling}, os.Getpid(), true},
		{"a thread of the group, not its id", me, sibling, sibling == os.Getpid()},
		{"another process", me, child.Process.Pid, false},
		{"the other process's own group", &task{tid: child.Process.Pid}, child.Process.Pid, true},
		{"no such process", me, 1 << 30, false},
	} {
		if got := c.task.ownGroup(c.x); got != c.want {
			t.Errorf("%s: ownGroup(%d) = %v, want %v", c.name, c.x, got, c.want)
		}
	}
}
