//go:build linux

// Package supervise is the unconfined process that owns one run of the
// bubblewrap provider (the launcher runs the other providers itself,
// package launch). It is a child subreaper, so every descendant of the
// command stays in its tree; it starts bwrap, serves the seccomp notifications
// Landlock cannot decide, enforces the wall deadline, and on exit,
// timeout, cancel or the launcher's death ends every descendant before it
// reports.
//
// Protocol with the launcher: fd 3 carries the plan, then single command
// bytes ('c' cancel); EOF on fd 3 means the launcher is gone. fd 4 receives
// the JSON report. fds 0-2 are handed to the command untouched.
package supervise

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/notify"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/proctree"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/spec"
)

// Arg0 marks a re-exec of the host binary as a supervisor.
const Arg0 = "confine-supervisor"

// Main runs the supervisor and returns the process exit status.
func Main() int {
	// The command's (or bwrap's) PR_SET_PDEATHSIG is tied to the forking
	// thread.
	runtime.LockOSThread()
	ctrl := os.NewFile(3, "ctrl")
	out := os.NewFile(4, "report")
	if ctrl == nil || out == nil {
		fmt.Fprintln(os.Stderr, "confine: supervisor started without its control fds")
		return 125
	}
	rep := run(ctrl)
	b, _ := json.Marshal(rep)
	if _, err := out.Write(b); err != nil {
		return 125
	}
	return 0
}

func fail(code int, format string, args ...any) *plan.Report {
	return &plan.Report{StartErr: fmt.Sprintf(format, args...), StartCode: code}
}

func run(ctrl *os.File) *plan.Report {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fail(125, "set child subreaper: %v", err)
	}
	// The terminal's ^C reaches the launcher, which decides; the supervisor
	// must outlive it to clean up.
	signal.Ignore(unix.SIGINT, unix.SIGQUIT, unix.SIGPIPE, unix.SIGTSTP, unix.SIGTTIN, unix.SIGTTOU)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM, unix.SIGHUP)

	p, err := plan.Read(ctrl)
	if err != nil {
		return fail(125, "supervisor: %v", err)
	}
	// The launcher runs the landlock+namespaces and core providers
	// itself (package launch); only bubblewrap runs under a supervisor.
	if p.Backend != plan.BackendBwrap {
		return fail(125, "supervisor: only the bubblewrap provider runs under a supervisor")
	}
	child, notifyFD, exitPipe, err := startBwrap(p)
	if err != nil {
		reapAll()
		var se *startError
		if errors.As(err, &se) {
			return fail(se.code, "%s", se.msg)
		}
		return fail(125, "%v", err)
	}
	start := time.Now()
	// bwrap is an unreaped child: its pidfd cannot name a reuse.
	ifd, err := unix.PidfdOpen(child, 0)
	if err != nil {
		_ = unix.Kill(child, unix.SIGKILL)
		reapAll()
		return fail(125, "supervisor: pidfd_open(bwrap): %v", err)
	}
	defer unix.Close(ifd)

	s := &session{p: p, child: child, exitPipe: exitPipe, self: os.Getpid(),
		rep: &plan.Report{Namespaces: true}, stats: &notify.Stats{}}
	cfg := notify.Config{Plan: p, Stats: s.stats, Init: &notify.Init{Pid: child, Pidfd: ifd}}
	stopNotify := notify.Start(notifyFD, cfg)
	s.sup = &proctree.Supervision{
		// bwrap itself must not get SIGTERM: its death SIGKILLs the
		// sandbox (--die-with-parent) and would cut the grace short.
		End:      proctree.EndTree(s.self, p.KillGrace, child),
		Deadline: start.Add(p.WallTime),
		Stops:    stops(ctrl, term),
	}
	if p.MemoryWatch > 0 {
		// Everything below this subreaper: bwrap and the run's tree.
		s.sup.Memory = proctree.WatchMemory(s.self, p.MemoryWatch)
	}
	// The supervisor is a subreaper: once it has no child left, no
	// descendant of the run is left.
	proctree.Supervise(s.sup, proctree.ReapAll(), s.onWait)
	stopNotify()
	return s.finish()
}

// session is one supervised bubblewrap run, once bwrap started.
type session struct {
	p        *plan.Plan
	child    int      // bwrap
	exitPipe *os.File // our init's status, from inside bwrap
	self     int
	rep      *plan.Report
	stats    *notify.Stats
	sup      *proctree.Supervision
	// mainDone: bwrap has been reaped.
	mainDone bool
}

// stops turns the launcher's command bytes on ctrl and the supervisor's
// SIGTERM and SIGHUP into the requests that end the run: 'c' (cancel) and
// the signals terminate, EOF (the launcher is gone, nobody is left to
// report to) kills at once.
func stops(ctrl *os.File, term <-chan os.Signal) <-chan proctree.Stop {
	c := make(chan proctree.Stop, 1)
	go func() {
		for range term {
			c <- proctree.StopTerminate
		}
	}()
	go func() {
		b := make([]byte, 1)
		for {
			n, err := ctrl.Read(b)
			if n == 1 {
				if b[0] == 'c' {
					c <- proctree.StopTerminate
				}
				continue
			}
			if err != nil {
				c <- proctree.StopKill
				return
			}
		}
	}()
	return c
}

// onWait takes bwrap's exit status, and our init's report of the
// command's when there is one; whatever is still alive then outlived the
// command.
func (s *session) onWait(ev proctree.Exit) (over bool) {
	if ev.Pid != s.child || s.mainDone {
		return false
	}
	s.mainDone = true
	rep := s.rep
	switch {
	case ev.Status.Exited():
		rep.ExitCode = ev.Status.ExitStatus()
	case ev.Status.Signaled():
		rep.ExitCode = -1
		rep.Signal = int(ev.Status.Signal())
	}
	if s.exitPipe != nil {
		// Our init inside bwrap was the PID namespace's: the command's
		// own status is on the pipe, and the kernel killed what outlived
		// it when init exited.
		if st, ok := readInitStatus(s.exitPipe); ok {
			rep.ExitCode, rep.Signal = st.ExitCode, st.Signal
			if st.Survivors > 0 {
				rep.Survivors = st.Survivors
				rep.Killed = true
			}
		} else if rep.ExitCode > 128 && rep.ExitCode < 128+65 {
			// bwrap reports its child's death by signal N as 128+N.
			rep.ExitCode, rep.Signal = -1, rep.ExitCode-128
		}
	}
	if !s.sup.End.Killing() && proctree.HasChildren() {
		if ds, err := proctree.Descendants(s.self); err == nil && len(ds) > 0 {
			rep.Survivors += len(ds)
			s.sup.Kill()
		}
	}
	return false
}

// finish completes the report once every descendant is gone, and removes
// the run's private directory and pids cgroup.
func (s *session) finish() *plan.Report {
	rep := s.rep
	for _, d := range s.stats.Denials() {
		rep.Denials = append(rep.Denials, spec.Denial{Syscall: d.Syscall, Path: d.Path, Errno: unix.ErrnoName(d.Errno), Reason: d.Reason})
	}
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_CHILDREN, &ru) == nil {
		rep.UserCPU = time.Duration(ru.Utime.Nano())
		rep.SysCPU = time.Duration(ru.Stime.Nano())
		rep.MaxRSSKB = ru.Maxrss
	}
	rep.TimedOut, rep.Cancelled = s.sup.TimedOut, s.sup.Cancelled
	rep.Killed = rep.Killed || s.sup.Killed
	rep.MemoryOver, rep.MemoryPeak = s.sup.OverMemory, s.sup.Memory.Peak()
	if !s.mainDone {
		rep.ExitCode = -1
		rep.Signal = int(unix.SIGKILL)
	}
	tmpdir.Remove(s.p.PrivateTmp)
	if s.p.PidsCgroup != "" {
		_ = os.Remove(s.p.PidsCgroup)
	}
	return rep
}

// reapAll reaps every child until none is left (after a failed start).
func reapAll() {
	for range proctree.ReapAll() {
	}
}

type startError struct {
	code int
	msg  string
}

func (e *startError) Error() string { return e.msg }

// readInitStatus reads what bubblewrap's init reported before it exited;
// false when it died without reporting (SIGKILL).
func readInitStatus(f *os.File) (plan.InitStatus, bool) {
	var st plan.InitStatus
	b, err := readAll(f)
	f.Close()
	if err != nil || len(b) == 0 {
		return st, false
	}
	return st, json.Unmarshal(b, &st) == nil
}

func readAll(f *os.File) ([]byte, error) {
	return io.ReadAll(io.LimitReader(f, 64<<10))
}
