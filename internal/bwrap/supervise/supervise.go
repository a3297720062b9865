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
	"context"
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

type waitEvent struct {
	pid int
	ws  unix.WaitStatus
}

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
	if p.Namespaces == nil || p.Namespaces.Bwrap == "" {
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
	// bwrap itself must not get SIGTERM: its death SIGKILLs the sandbox
	// (--die-with-parent) and would cut the grace short.
	s.end = proctree.EndTree(s.self, p.KillGrace, child)
	defer s.end.Stop()
	ctx, stopNotify := context.WithCancel(context.Background())
	notifyDone := s.serve(ctx, notifyFD, &notify.Init{Pid: child, Pidfd: ifd})
	waits := make(chan waitEvent, 64)
	allGone := make(chan struct{})
	go reaper(waits, allGone)
	ctrlMsg := readControl(ctrl)
	deadline := time.NewTimer(p.WallTime - time.Since(start))
	defer deadline.Stop()
	for {
		select {
		case ev := <-waits:
			s.onWait(ev)
		case <-allGone:
			// select picks at random among ready cases: the events the
			// reaper queued before it found no child left come first.
			for len(waits) > 0 {
				s.onWait(<-waits)
			}
			s.end.Stop()
			stopNotify()
			<-notifyDone
			return s.finish()
		case <-deadline.C:
			s.rep.TimedOut = true
			s.terminate()
		case m := <-ctrlMsg:
			switch m {
			case 'c':
				s.rep.Cancelled = true
				s.terminate()
			case 0:
				// Nobody is left to report to: end everything now.
				s.rep.Cancelled = true
				s.kill()
			}
		case <-term:
			s.rep.Cancelled = true
			s.terminate()
		case <-s.end.Grace():
			s.kill()
		case <-s.end.Tick():
			s.end.Sweep()
		}
	}
}

// session is one supervised bubblewrap run, once bwrap started.
type session struct {
	p        *plan.Plan
	child    int      // bwrap
	exitPipe *os.File // our init's status, from inside bwrap
	self     int
	rep      *plan.Report
	stats    *notify.Stats
	end      *proctree.Ender
	// mainDone: bwrap has been reaped.
	mainDone bool
}

// serve answers the seccomp notifications until ctx is cancelled; the
// channel receives once it stopped.
func (s *session) serve(ctx context.Context, notifyFD int, init *notify.Init) <-chan struct{} {
	done := make(chan struct{}, 1)
	if notifyFD < 0 {
		done <- struct{}{}
		return done
	}
	go func() {
		err := notify.Serve(ctx, notifyFD, notify.Config{
			WritableRoots: s.p.WritableRoots,
			SocketAllow:   s.p.SocketAllow,
			Stats:         s.stats,
			Init:          init,
			MaxTasks:      s.p.MaxTasks(),
		})
		unix.Close(notifyFD)
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "confine: notification supervisor: %v\n", err)
		}
		done <- struct{}{}
	}()
	return done
}

// readControl delivers the launcher's command bytes, then 0 at EOF (the
// launcher is gone).
func readControl(ctrl *os.File) <-chan byte {
	msgs := make(chan byte, 1)
	go func() {
		b := make([]byte, 1)
		for {
			n, err := ctrl.Read(b)
			if n == 1 {
				msgs <- b[0]
				continue
			}
			if err != nil {
				msgs <- 0
				return
			}
		}
	}()
	return msgs
}

func (s *session) terminate() {
	if s.end.Terminate() {
		s.rep.Killed = true
	}
}

func (s *session) kill() {
	if !s.end.Killing() {
		s.rep.Killed = true
		s.end.Kill()
	}
}

// onWait takes bwrap's exit status, and our init's report of the
// command's when there is one; whatever is still alive then outlived the
// command.
func (s *session) onWait(ev waitEvent) {
	if ev.pid != s.child || s.mainDone {
		return
	}
	s.mainDone = true
	rep := s.rep
	switch {
	case ev.ws.Exited():
		rep.ExitCode = ev.ws.ExitStatus()
	case ev.ws.Signaled():
		rep.ExitCode = -1
		rep.Signal = int(ev.ws.Signal())
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
	if !s.end.Killing() && hasChildren() {
		if ds, err := proctree.Descendants(s.self); err == nil && len(ds) > 0 {
			rep.Survivors += len(ds)
			s.kill()
		}
	}
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

// reaper is the only caller of wait4: it reports every reaped child and
// closes allGone when the supervisor has no children left. Because the
// supervisor is a subreaper, no children means no descendants.
func reaper(waits chan<- waitEvent, allGone chan<- struct{}) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			close(allGone)
			return
		}
		waits <- waitEvent{pid, ws}
	}
}

// hasChildren asks the kernel, without reaping, whether the supervisor has
// any child left; the common case (none) then skips the /proc scan.
func hasChildren() bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_ALL, 0, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT|unix.WALL, nil)
	return err != unix.ECHILD
}

func reapAll() {
	for {
		var ws unix.WaitStatus
		_, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return
		}
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
