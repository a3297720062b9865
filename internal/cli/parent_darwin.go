package cli

import (
	"os"
	"time"
)

// pollWaiter notices the parent's exit as a change of getppid(): this
// process is reparented when its parent exits. macOS has no pidfd; a
// kqueue NOTE_EXIT watch would do the same sooner, at more code.
type pollWaiter struct {
	ppid int
	quit chan struct{}
}

func parentWaiter(ppid int) (*pollWaiter, error) {
	return &pollWaiter{ppid: ppid, quit: make(chan struct{})}, nil
}

// wait returns true once the parent has exited, false after stop.
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
