//go:build linux || darwin

package cli

import (
	"os"
	"time"
)

// parentWatch waits for the parent's exit: a pidfd on Linux, else polling.
type parentWatch interface {
	// String says how: "through a pidfd", "by polling getppid() (...)".
	String() string
	// wait blocks until the parent exits (true) or stop is called (false).
	wait() bool
	// stop ends a wait, or makes the next one return at once.
	stop()
	// release frees what the watch holds, once no wait is running.
	release()
}

// pollWaiter notices the parent's exit as a change of getppid(): this
// process is reparented when its parent exits. macOS has no pidfd (a
// kqueue NOTE_EXIT watch would do the same sooner, at more code), and a
// Linux seccomp profile older than pidfd_open (Docker's before 20.10)
// refuses it.
type pollWaiter struct {
	ppid int
	quit chan struct{}
	// why there is no pidfd.
	why string
}

func newPollWaiter(ppid int, why string) *pollWaiter {
	return &pollWaiter{ppid: ppid, quit: make(chan struct{}), why: why}
}

func (w *pollWaiter) String() string { return "by polling getppid() every 100ms (" + w.why + ")" }

func (w *pollWaiter) wait() bool {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-w.quit:
			return false
		case <-t.C:
			if os.Getppid() != w.ppid {
				return true
			}
		}
	}
}

func (w *pollWaiter) stop()    { close(w.quit) }
func (w *pollWaiter) release() {}
