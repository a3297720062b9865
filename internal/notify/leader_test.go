//go:build linux && (amd64 || arm64)

package notify

import (
	"os"
	"os/exec"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

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
