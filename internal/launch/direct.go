package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/capture"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/notify"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/proctree"
	"github.com/confine-sandbox/confine/internal/program"
	"github.com/confine-sandbox/confine/internal/seccomp"
	"github.com/confine-sandbox/confine/internal/spawn"
	"github.com/confine-sandbox/confine/spec"
)

// errNamespaces says the namespaces could not be set up; the run may fall
// back to the core provider.
type errNamespaces struct{ msg string }

func (e *errNamespaces) Error() string { return e.msg }

// runDirect runs a plan without a supervisor process or a second Go
// runtime: the launcher clones the run's init itself from a prepared
// program (packages program and spawn) and does the supervisor's work
// (deadline, cancel, seccomp notifications, report) in this process.
//
// With namespaces the init is the PID namespace's: it dies with the
// launching thread, and the kernel ends every process of the namespace
// when it exits. Without (the core provider) it is a child subreaper in
// this PID namespace: every descendant of the command stays below it, this
// process signals and kills them (init only reaps), and if this process
// dies the init turns into the reaper (package reaper), which kills them.
func runDirect(ctx context.Context, p *plan.Plan, pio IO) (*Outcome, error) {
	ns := p.Namespaces != nil
	// A namespaced run bounded by its pid_max does not join the pids
	// cgroup, which is then not even created.
	joined := p.PidsCgroup != "" && (!ns || p.Namespaces.PidMax == 0)
	noCgroup := false
	if joined {
		var err error
		if joined, err = pidsCgroup(p); err != nil {
			return nil, err
		}
		noCgroup = !joined
	}
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	pipe := func() (r, w *os.File) {
		if r, w, err := os.Pipe(); err == nil {
			closers = append(closers, r, w)
			return r, w
		}
		return nil, nil
	}
	outR, outW := pipe()
	errR, errW := pipe()
	statusR, statusW := pipe()
	exitR, exitW := pipe()
	syncR, syncW := pipe()
	if syncW == nil || outW == nil || errW == nil || statusW == nil || exitW == nil {
		return nil, fmt.Errorf("%w: pipe: too many open files?", spec.ErrLaunch)
	}
	// Bigger pipes cut context switches on floods; Fd() would make the
	// read ends blocking, out of the poller.
	capture.GrowPipe(outR, 1<<20)
	capture.GrowPipe(errR, 1<<20)
	var stdin, stdinW *os.File
	if pio.Stdin != nil {
		stdin, stdinW = pipe()
	} else if f, err := os.Open(os.DevNull); err == nil {
		stdin = f
		closers = append(closers, f)
	}
	if stdin == nil {
		return nil, fmt.Errorf("%w: stdin", spec.ErrLaunch)
	}
	fds := program.FDs{Stdin: int(stdin.Fd()), Stdout: int(outW.Fd()), Stderr: int(errW.Fd()),
		Status: int(statusW.Fd()), Exit: int(exitW.Fd()), Notify: -1, Sync: int(syncR.Fd()), Janitor: -1, Cgroup: -1}
	if p.PrivateTmp != "" {
		// The janitor reaches the private directory through its parent
		// (see program.Built.janitor), which the namespace's covers hide.
		if f, err := os.OpenFile(filepath.Dir(p.PrivateTmp), unix.O_PATH|unix.O_DIRECTORY, 0); err == nil {
			closers = append(closers, f)
			fds.Janitor = int(f.Fd())
		}
	}
	if joined {
		if f, err := os.OpenFile(filepath.Dir(p.PidsCgroup), unix.O_PATH|unix.O_DIRECTORY, 0); err == nil {
			closers = append(closers, f)
			fds.Cgroup = int(f.Fd())
		}
	}
	// The flags for calls that name another process apply only without a
	// PID namespace (also after a fall-back to the core).
	sc := p.Seccomp.Effective(ns)
	wantNotify := sc.Listener()
	var sockParent, sockChild *os.File
	if wantNotify {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%w: socketpair: %v", spec.ErrLaunch, err)
		}
		sockParent = os.NewFile(uintptr(pair[0]), "notify-parent")
		sockChild = os.NewFile(uintptr(pair[1]), "notify-child")
		closers = append(closers, sockParent, sockChild)
		fds.Notify = pair[1]
	}

	policy := landlock.FromPlan(p.Landlock)
	if ns {
		// The command sees the /proc of its own PID namespace.
		policy.Defer = func(path string) bool { return strings.HasPrefix(path, "/proc/") }
	}
	rs, err := landlock.Prepare(policy)
	if err != nil {
		return nil, fmt.Errorf("%w: landlock: %v", spec.ErrLaunch, err)
	}
	defer rs.Close()
	fds.Ruleset = rs.FD
	arch, err := seccomp.NativeArch()
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %v", spec.ErrLaunch, err)
	}
	filter, err := seccomp.Cached(seccomp.FromPlan(arch, sc))
	if err != nil {
		return nil, fmt.Errorf("%w: seccomp: %v", spec.ErrLaunch, err)
	}
	var b *program.Built
	privileged := program.Privileged()
	if ns {
		layout := nsinit.PlanLayout(p.Namespaces, nsinit.PlanRoots(p), func(path string) (string, bool) {
			r := rs.Resolved[path]
			return r.Path, r.Dir
		})
		var lerr error
		if layout.Stage, lerr = nsinit.FindStage(); lerr != nil {
			return nil, &errNamespaces{host.ExplainNamespaceFailure("namespace set-up failed: " + lerr.Error())}
		}
		b, err = program.Namespaced(p, fds, rs, layout, filter)
	} else {
		b, err = program.Subreaped(p, fds, filter, privileged, selfExe)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	prog := b.P
	// With CLONE_VM the init runs on stacks in this process's memory.
	keepProg := false
	defer func() {
		if !keepProg {
			prog.Close()
		}
	}()
	// Without namespaces, an unprivileged init's rm could not remove what
	// the command made unreadable to itself: the launcher does it.
	detach := pio.DetachCleanup && prog.HasJanitor() && (ns || privileged)
	prog.JanitorAfterReport = detach

	// PR_SET_PDEATHSIG follows the thread that forks: keep it for the run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := prog.Start()
	for _, f := range []*os.File{stdin, outW, errW, statusW, exitW, syncR} {
		f.Close()
	}
	if sockChild != nil {
		sockChild.Close()
	}
	if err != nil {
		if !ns {
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
		return nil, &errNamespaces{fmt.Sprintf("user namespaces unavailable: clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS): %v", errors.Unwrap(err))}
	}
	reap := func() {
		_ = unix.Kill(pid, unix.SIGKILL)
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
	}
	// The supervisor's handlers for calls that name another process, and
	// its fork count, need the init's identity: a pidfd taken now, while
	// init is an unreaped child (its number cannot have been reused).
	var runInit *notify.Init
	if wantNotify {
		ifd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			reap()
			return nil, fmt.Errorf("%w: pidfd_open(init): %v", spec.ErrLaunch, err)
		}
		defer unix.Close(ifd)
		runInit = &notify.Init{Pid: pid, Pidfd: ifd}
	}
	if ns {
		if err := mapIDs(pid, p.Namespaces); err != nil {
			reap()
			return nil, &errNamespaces{host.ExplainNamespaceFailure("namespace set-up failed: " + err.Error())}
		}
	}
	if joined {
		// Init waits for the go-ahead below, so it is counted before it
		// can fork anything.
		if err := os.WriteFile(p.PidsCgroup+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0); err != nil {
			reap()
			return nil, fmt.Errorf("%w: join pids cgroup %s: %v", spec.ErrLaunch, p.PidsCgroup, err)
		}
	}
	if _, err := syncW.Write([]byte{1}); err != nil {
		reap()
		return nil, fmt.Errorf("%w: release init: %v", spec.ErrLaunch, err)
	}
	syncW.Close()

	listener := -1
	if wantNotify {
		if fd, err := spawn.RecvFD(sockParent); err == nil {
			listener = fd
		}
	}
	// EOF: the command exec'd (close-on-exec) or the child gave up.
	_, _ = io.Copy(io.Discard, statusR)
	if f := prog.Failure(); f != nil {
		reap()
		if listener >= 0 {
			unix.Close(listener)
		}
		if b.InInit(f.Step) {
			if !ns {
				return nil, fmt.Errorf("%w: init: %s: %v", spec.ErrLaunch, b.Describe(f.Step), f.Errno)
			}
			return nil, &errNamespaces{host.ExplainNamespaceFailure(fmt.Sprintf("namespace set-up failed: %s: %v", b.Describe(f.Step), f.Errno))}
		}
		code, msg := b.StartFailure(p.Path, f)
		return &Outcome{Report: plan.Report{StartCode: code, StartErr: msg}}, nil
	}
	if wantNotify && listener < 0 {
		reap()
		return nil, fmt.Errorf("%w: the command exec'd without handing over its seccomp listener", spec.ErrLaunch)
	}

	streams := startStreams(pio, outR, errR, stdinW)
	nctx, stopNotify := context.WithCancel(context.Background())
	notifyDone := make(chan struct{})
	stats := &notify.Stats{}
	if listener >= 0 {
		go func() {
			defer close(notifyDone)
			err := notify.Serve(nctx, listener, notify.Config{WritableRoots: p.WritableRoots, SocketAllow: p.SocketAllow, Init: runInit, Stats: stats,
				MaxTasks: p.MaxTasks()})
			unix.Close(listener)
			if err != nil && !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "confine: notification supervisor: %v\n", err)
			}
		}()
	} else {
		close(notifyDone)
	}

	type waited struct {
		ws unix.WaitStatus
		ru unix.Rusage
	}
	done := make(chan waited, 1)
	go func() {
		var w waited
		for {
			_, err := unix.Wait4(pid, &w.ws, unix.WALL, &w.ru)
			if err != unix.EINTR {
				break
			}
		}
		done <- w
	}()
	type reported struct {
		st spawn.Status
		ok bool
	}
	// Init reports once every process of the tree is gone (a subreaper
	// init first says when some outlived the command: Pending); EOF
	// without a report means it was killed.
	reports := make(chan reported, 2)
	go func() {
		for {
			var b [spawn.StatusSize]byte
			n, _ := io.ReadFull(exitR, b[:])
			st, ok := spawn.ParseStatus(b[:n])
			reports <- reported{st, ok}
			if !ok || st.Pending == 0 {
				return
			}
		}
	}()

	rep := plan.Report{Namespaces: ns}
	deadline := time.NewTimer(p.WallTime)
	defer deadline.Stop()
	ctxDone := ctx.Done()
	// A namespace ends with its init; a subreaper init's descendants are
	// swept until it reports that none is left.
	end := proctree.EndTree(pid, p.KillGrace)
	if ns {
		end = proctree.EndNamespace(pid, p.KillGrace)
	}
	defer end.Stop()
	terminate := func() {
		if end.Terminate() {
			rep.Killed = true
		}
	}
	var w waited
	var r reported
	exited, reportDone := false, false
	// Once init has reported, the tree is gone; init's exit (for a
	// namespace, its teardown: an RCU grace period for the mounts) need
	// not be waited for, unless init is in the pids cgroup this run
	// removes. Detached, init's janitor cleans up after us.
	for !exited || !reportDone {
		if reportDone && r.ok && (detach || !joined) {
			break
		}
		select {
		case w = <-done:
			exited = true
		case r = <-reports:
			if r.ok && r.st.Pending != 0 {
				end.Kill()
				continue
			}
			reportDone = true
		case <-deadline.C:
			rep.TimedOut = true
			terminate()
		case <-ctxDone:
			ctxDone = nil
			rep.Cancelled = true
			terminate()
		case <-end.Grace():
			end.Kill()
		case <-end.Tick():
			end.Sweep()
		}
	}
	if !exited {
		// Its stacks are in this process: release them once it is gone.
		keepProg = true
		go func() {
			<-done
			prog.Close()
		}()
	}
	if r.ok {
		rep.ExitCode, rep.Signal = int(r.st.Code), int(r.st.Signal)
		if r.st.Survivors > 0 {
			rep.Survivors = int(r.st.Survivors)
			rep.Killed = true
		}
		rep.UserCPU, rep.SysCPU, rep.MaxRSSKB = time.Duration(r.st.UserNs), time.Duration(r.st.SysNs), r.st.MaxRSSKB
	} else {
		rep.ExitCode, rep.Signal = -1, int(unix.SIGKILL)
		if w.ws.Signaled() {
			rep.Signal = int(w.ws.Signal())
		}
		rep.UserCPU = time.Duration(w.ru.Utime.Nano())
		rep.SysCPU = time.Duration(w.ru.Stime.Nano())
		rep.MaxRSSKB = w.ru.Maxrss
	}
	stopNotify()
	<-notifyDone
	for _, d := range stats.Denials() {
		rep.Denials = append(rep.Denials, spec.Denial{Syscall: d.Syscall, Path: d.Path, Errno: unix.ErrnoName(d.Errno), Reason: d.Reason})
	}
	stdout, stderr, cerr := streams()
	out := &Outcome{Report: rep, Stdout: stdout, Stderr: stderr, CleanupDetached: !exited && detach, NoPidsCgroup: noCgroup}
	if cerr != nil {
		return out, fmt.Errorf("%w: capture: %v", spec.ErrLaunch, cerr)
	}
	return out, nil
}

// mapIDs writes the user namespace's id maps for init, as os/exec would
// for SysProcAttr.UidMappings.
func mapIDs(pid int, ns *plan.Namespaces) error {
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	line := func(ids []int) []byte {
		var sb strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&sb, "%d %d 1\n", id, id)
		}
		return []byte(sb.String())
	}
	if !ns.Setgroups {
		if err := os.WriteFile(dir+"setgroups", []byte("deny"), 0); err != nil {
			return fmt.Errorf("write setgroups: %w", err)
		}
	}
	if err := os.WriteFile(dir+"uid_map", line(ns.UIDs), 0); err != nil {
		return fmt.Errorf("write uid_map: %w", err)
	}
	if err := os.WriteFile(dir+"gid_map", line(ns.GIDs), 0); err != nil {
		return fmt.Errorf("write gid_map: %w", err)
	}
	return nil
}

// selfExe is this binary as the init sees it (it shares this process's
// memory, executable included), for it to re-execute as the reaper.
const selfExe = "/proc/self/exe"
