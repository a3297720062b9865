//go:build darwin

package seatbelt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/capture"
	"github.com/confine-sandbox/confine/spec"
)

// Run is one command to start under a profile.
type Run struct {
	Profile    string
	Path       string // absolute
	Argv       []string
	Env        []string
	Dir        string
	Stdin      io.Reader
	Limits     spec.Limits
	LiveStdout io.Writer
	LiveStderr io.Writer
	LiveLimit  int64
}

// Outcome is what Exec observed.
type Outcome struct {
	ExitCode, Signal            int
	TimedOut, Cancelled, Killed bool
	Survivors                   int
	Stdout, Stderr              spec.Stream
	Usage                       spec.Usage
}

// Exec runs r under sandbox-exec in a new session (so its own process
// group), bounded by r.Limits' wall time and output size. On timeout or
// cancellation the group gets SIGTERM, then SIGKILL after the grace; when
// the command exits, what is left of its group and of its descendants
// (sysctl kern.proc) is killed and counted as survivors. A descendant that
// left the group (setsid) and was orphaned to launchd is out of reach:
// tree-kill is not claimed on macOS.
func Exec(ctx context.Context, r Run) (Outcome, error) {
	var out Outcome
	if err := Available(); err != nil {
		return out, err
	}
	cloexecAll()
	argv := append([]string{"sandbox-exec", "-p", r.Profile, "--", r.Path}, r.Argv[1:]...)
	cmd := &exec.Cmd{Path: SandboxExec, Args: argv, Env: r.Env, Dir: r.Dir,
		SysProcAttr: &syscall.SysProcAttr{Setsid: true}}
	if r.Stdin != nil {
		// Always a fresh pipe, never the caller's descriptor: a terminal
		// on fd 0 would let a root command push input with TIOCSTI. The
		// copy is not waited for (os/exec would block Wait until the
		// caller's stdin reaches EOF).
		pr, pw, err := os.Pipe()
		if err != nil {
			return out, fmt.Errorf("%w: stdin pipe: %v", spec.ErrLaunch, err)
		}
		defer pr.Close()
		go func() { _, _ = io.Copy(pw, r.Stdin); pw.Close() }()
		cmd.Stdin = pr
	}
	so, se := capture.New(r.Limits.OutputBytes, r.LiveStdout, r.LiveLimit), capture.New(r.Limits.OutputBytes, r.LiveStderr, r.LiveLimit)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return out, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return out, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	if err := cmd.Start(); err != nil {
		return out, fmt.Errorf("%w: sandbox-exec: %v", spec.ErrLaunch, err)
	}
	pgid := cmd.Process.Pid
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = capture.Drain(stdout, so) }()
	go func() { defer wg.Done(); _ = capture.Drain(stderr, se) }()

	done := make(chan error, 1)
	go func() { wg.Wait(); done <- cmd.Wait() }()
	wall := r.Limits.WallTime
	if wall <= 0 {
		wall = spec.DefaultLimits().WallTime
	}
	timer := time.NewTimer(wall)
	defer timer.Stop()
	var werr error
	select {
	case werr = <-done:
	case <-timer.C:
		out.TimedOut = true
	case <-ctx.Done():
		out.Cancelled = true
	}
	if out.TimedOut || out.Cancelled {
		out.Killed = true
		killTree(pgid, unix.SIGTERM)
		grace := r.Limits.KillGrace
		if grace <= 0 {
			grace = 2 * time.Second
		}
		select {
		case werr = <-done:
		case <-time.After(grace):
			killTree(pgid, unix.SIGKILL)
			werr = <-done
		}
	}
	// Whatever outlived the command in its group or below it.
	out.Survivors = killTree(pgid, unix.SIGKILL)
	out.Stdout, out.Stderr = so.Stream(), se.Stream()
	st := cmd.ProcessState
	if st == nil {
		return out, fmt.Errorf("%w: %v", spec.ErrLaunch, werr)
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok {
		switch {
		case ws.Signaled():
			out.Signal = int(ws.Signal())
		default:
			out.ExitCode = ws.ExitStatus()
		}
	}
	if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
		// macOS reports ru_maxrss in bytes.
		out.Usage = spec.Usage{UserCPU: time.Duration(ru.Utime.Nano()), SysCPU: time.Duration(ru.Stime.Nano()), MaxRSSKB: ru.Maxrss / 1024}
	}
	if (out.ExitCode == 65 || out.ExitCode == 71) && strings.HasPrefix(string(out.Stderr.Head), "sandbox-exec:") {
		// sandbox-exec itself failed (a profile it rejected): the
		// command never started.
		return out, fmt.Errorf("%w: %s", spec.ErrLaunch, strings.TrimSpace(string(out.Stderr.Head)))
	}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return out, fmt.Errorf("%w: %v", spec.ErrLaunch, werr)
	}
	return out, nil
}

// killTree signals the process group pgid and every process Doomed finds
// under its leader in kern.proc, and returns how many of those it
// signalled (the leader excluded). Once the leader has exited, its
// children are launchd's: only the group finds them.
func killTree(pgid int, sig unix.Signal) int {
	n := 0
	if kps, err := unix.SysctlKinfoProcSlice("kern.proc.all"); err == nil {
		procs := make([]Proc, len(kps))
		for i, p := range kps {
			procs[i] = Proc{Pid: int(p.Proc.P_pid), Ppid: int(p.Eproc.Ppid), Pgid: int(p.Eproc.Pgid)}
		}
		for _, pid := range Doomed(procs, pgid) {
			if unix.Kill(pid, sig) == nil {
				n++
			}
		}
	}
	_ = unix.Kill(-pgid, sig)
	return n
}

// cloexecAll marks every descriptor >= 3 of this process close-on-exec, so
// that none of the caller's reaches the command (Go opens its own
// close-on-exec; one inherited from the caller's parent is not).
func cloexecAll() {
	ents, err := os.ReadDir("/dev/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		var fd int
		if _, err := fmt.Sscanf(e.Name(), "%d", &fd); err != nil || fd < 3 {
			continue
		}
		_, _ = unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC)
	}
}
