//go:build linux

package proctree

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSupervise takes real processes through the loop every supervisor of
// a run uses: each way a run ends (its own exit, the deadline, a
// context's cancel, a stop request from outside) and what the loop then
// reports. A process that is not ended keeps the test waiting, never
// passing.
func TestSupervise(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	closed := make(chan struct{})
	close(closed)
	stop := func(s Stop) <-chan Stop {
		c := make(chan Stop, 1)
		c <- s
		return c
	}
	const ignoreTerm = `trap "" TERM; echo ready; exec sleep 300`
	cases := []struct {
		name   string
		script string
		// grace: a long one proves SIGKILL came without waiting for it.
		grace    time.Duration
		deadline time.Time
		done     <-chan struct{}
		stops    <-chan Stop
		// wantSig: the signal that ended the process (0: it exited with
		// wantCode).
		wantSig                              unix.Signal
		wantCode                             int
		wantTimedOut, wantCancel, wantKilled bool
	}{
		{name: "exits by itself", script: `echo ready; exit 3`, wantCode: 3},
		{name: "deadline", script: `echo ready; exec sleep 300`, deadline: time.Now(),
			wantSig: unix.SIGTERM, wantTimedOut: true, wantKilled: true},
		{name: "context done", script: `echo ready; exec sleep 300`, done: closed,
			wantSig: unix.SIGTERM, wantCancel: true, wantKilled: true},
		{name: "terminate ignored, then grace", script: ignoreTerm, grace: 50 * time.Millisecond, stops: stop(StopTerminate),
			wantSig: unix.SIGKILL, wantCancel: true, wantKilled: true},
		{name: "kill at once", script: ignoreTerm, grace: time.Hour, stops: stop(StopKill),
			wantSig: unix.SIGKILL, wantCancel: true, wantKilled: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer reapChildren()
			pid := startReady(t, c.script)
			s := &Supervision{End: EndTree(os.Getpid(), c.grace), Deadline: c.deadline, Done: c.done, Stops: c.stops}
			var got Exit
			Supervise(s, WaitPid(pid), func(e Exit) bool { got = e; return true })
			if got.Pid != pid {
				t.Fatalf("reaped %d, want %d", got.Pid, pid)
			}
			switch {
			case c.wantSig != 0 && (!got.Status.Signaled() || got.Status.Signal() != c.wantSig):
				t.Errorf("status %#x, want death by %v", got.Status, c.wantSig)
			case c.wantSig == 0 && (!got.Status.Exited() || got.Status.ExitStatus() != c.wantCode):
				t.Errorf("status %#x, want exit %d", got.Status, c.wantCode)
			}
			if s.TimedOut != c.wantTimedOut || s.Cancelled != c.wantCancel || s.Killed != c.wantKilled {
				t.Errorf("TimedOut, Cancelled, Killed = %v, %v, %v; want %v, %v, %v",
					s.TimedOut, s.Cancelled, s.Killed, c.wantTimedOut, c.wantCancel, c.wantKilled)
			}
			if s.End.Tick() != nil {
				t.Error("Supervise returned without stopping the sweeps")
			}
		})
	}
}

// TestReapAll checks the subreaper's event source: every child is
// reported, then the channel closes, which ends the loop.
func TestReapAll(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	reapChildren()
	// The grandchild outlives its parent and is reparented here.
	cmd := exec.Command("/bin/sh", "-c", `(sleep 0.2; exit 4) & exit 2`)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	codes := map[int]int{}
	s := &Supervision{End: EndTree(os.Getpid(), 0)}
	Supervise(s, ReapAll(), func(e Exit) bool { codes[e.Status.ExitStatus()]++; return false })
	if codes[2] != 1 || codes[4] != 1 || len(codes) != 2 {
		t.Errorf("reaped exit codes %v, want one 2 and one 4", codes)
	}
	if HasChildren() {
		t.Error("HasChildren after ReapAll closed")
	}
	if s.Killed || s.Cancelled || s.TimedOut {
		t.Error("a run that ended by itself reported as ended by the supervision")
	}
}
