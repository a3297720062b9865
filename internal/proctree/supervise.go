//go:build linux

package proctree

import (
	"time"

	"golang.org/x/sys/unix"
)

// Stop is a request to end a run that arrives from outside it.
type Stop int

const (
	// StopTerminate ends the run gracefully: SIGTERM, the grace period,
	// then SIGKILL (a cancel, the supervisor's SIGTERM).
	StopTerminate Stop = iota + 1
	// StopKill kills the run at once: nobody is left to report to.
	StopKill
)

// Supervision is the one loop that takes a run to its end, whoever
// supervises it: the launcher (core and namespaced backends) or
// bubblewrap's supervisor process. What differs between them is data: how
// cancellation arrives (Done, Stops), who reaps (the events the caller
// feeds Supervise) and how the tree ends (End). Package reaper, which sits
// in the run's pids cgroup and so must not need another thread, keeps its
// own single-goroutine sweep.
//
// After Supervise returns, TimedOut, Cancelled and Killed say how the run
// ended. A Supervision is used by one goroutine.
type Supervision struct {
	// End ends the run's tree; Supervise stops it before returning.
	End *Ender
	// Deadline ends the run gracefully when it passes; the zero time
	// means none.
	Deadline time.Time
	// Done, a context's, terminates the run once when it closes.
	Done <-chan struct{}
	// Stops carries requests from outside (a control pipe, a signal).
	Stops <-chan Stop
	// Memory, when set, bounds the tree's summed memory: the first
	// sample above its bound kills the run at once (as the kernel's OOM
	// killer would, without a grace period). Supervise stops it before
	// returning.
	Memory *MemoryWatch

	// TimedOut: the deadline passed. Cancelled: Done or a Stop ended the
	// run. Killed: the supervision signalled the tree. OverMemory: Memory
	// saw the tree above its bound and killed it.
	TimedOut, Cancelled, Killed, OverMemory bool
}

// Terminate begins the graceful end of the tree (no-op when it is already
// ending).
func (s *Supervision) Terminate() {
	if s.End.Terminate() {
		s.Killed = true
	}
}

// Kill kills the tree now, unless it is already being killed.
func (s *Supervision) Kill() {
	if !s.End.Killing() {
		s.Killed = true
		s.End.Kill()
	}
}

// Supervise runs the loop until on reports the run over or events is
// closed (every event sent before the close is handed to on first). on
// applies one of the caller's events (a reaped child, the init's
// report); it may call s.Kill or s.End's methods. Meanwhile the deadline,
// Done and Stops end the tree, and the grace period and the kill sweeps
// run.
func Supervise[E any](s *Supervision, events <-chan E, on func(E) (over bool)) {
	defer s.End.Stop()
	defer s.Memory.Stop()
	var deadline <-chan time.Time
	if !s.Deadline.IsZero() {
		t := time.NewTimer(time.Until(s.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	done := s.Done
	for {
		select {
		case e, ok := <-events:
			if !ok || on(e) {
				return
			}
		case <-deadline:
			s.TimedOut = true
			s.Terminate()
		case <-done:
			done = nil
			s.Cancelled = true
			s.Terminate()
		case m := <-s.Stops:
			s.Cancelled = true
			if m == StopKill {
				s.Kill()
			} else {
				s.Terminate()
			}
		case <-s.Memory.Over():
			s.OverMemory = true
			s.Kill()
		case <-s.End.Grace():
			s.Kill()
		case <-s.End.Tick():
			s.End.Sweep()
		}
	}
}

// Exit is one reaped child.
type Exit struct {
	Pid    int
	Status unix.WaitStatus
	Usage  unix.Rusage
}

// WaitPid reaps pid (and only it) once it exits, and sends its Exit.
func WaitPid(pid int) <-chan Exit {
	c := make(chan Exit, 1)
	go func() {
		var e Exit
		for {
			var err error
			e.Pid, err = unix.Wait4(pid, &e.Status, unix.WALL, &e.Usage)
			if err != unix.EINTR {
				break
			}
		}
		c <- e
	}()
	return c
}

// ReapAll is a child subreaper's only caller of wait4: it sends every
// child it reaps, and closes the channel when none is left, which for a
// subreaper means no descendant is left.
func ReapAll() <-chan Exit {
	c := make(chan Exit, 64)
	go func() {
		defer close(c)
		for {
			var e Exit
			pid, err := unix.Wait4(-1, &e.Status, unix.WALL, &e.Usage)
			if err == unix.EINTR {
				continue
			}
			if err != nil {
				return
			}
			e.Pid = pid
			c <- e
		}
	}()
	return c
}

// HasChildren asks the kernel, without reaping, whether this process has
// any child left.
func HasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	return err != unix.ECHILD
}
