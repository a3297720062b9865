//go:build linux

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
//
// The phases: open the run's descriptors (open), prepare the program
// (prepare), start the init and wait until the command exec'd (start),
// then supervise it to its end (supervise). ns is the backend's: the
// init creates the namespaces (landlock+namespaces) or not (the core).
func runDirect(ctx context.Context, p *plan.Plan, pio IO, ns bool) (*Outcome, error) {
	d := &direct{p: p, pio: pio, ns: ns}
	defer d.close()
	if err := d.open(); err != nil {
		return nil, err
	}
	rs, err := d.prepare()
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	// PR_SET_PDEATHSIG follows the thread that forks: keep it for the run.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if out, err := d.start(); out != nil || err != nil {
		return out, err
	}
	return d.supervise(ctx)
}

// direct is one run of runDirect.
type direct struct {
	p   *plan.Plan
	pio IO
	ns  bool
	// joined: the init joins the run's pids cgroup; noCgroup: it could
	// not be made and the profile waived its guarantee.
	joined, noCgroup bool
	// private: the Landlock rules of the namespace's private tmpfs
	// directories, for notify.Create.InRoot.
	private []landlock.Deferred

	closers                      []*os.File
	outR, outW, errR, errW       *os.File
	statusR, statusW             *os.File
	exitR, exitW, syncR, syncW   *os.File
	stdin, stdinW                *os.File
	sockParent, sockChild        *os.File
	fds                          program.FDs
	b                            *program.Prepared
	pid, listener                int
	runInit                      *notify.Init
	netns                        *os.File // from pio.NetPool
	keepProg, detach, privileged bool
}

func (d *direct) close() {
	for _, f := range d.closers {
		f.Close()
	}
	if d.runInit != nil {
		unix.Close(d.runInit.Pidfd)
	}
	if d.b != nil && !d.keepProg {
		d.b.P.Close()
	}
}

func (d *direct) pipe() (r, w *os.File) {
	if r, w, err := os.Pipe(); err == nil {
		d.closers = append(d.closers, r, w)
		return r, w
	}
	return nil, nil
}

// open makes the pids cgroup and every descriptor the init and the
// command get.
func (d *direct) open() error {
	p := d.p
	// A namespaced run bounded by its pid_max does not join the pids
	// cgroup, which is then not even created.
	d.joined = p.PidsCgroup != "" && (!d.ns || p.Namespaces.PidMax == 0)
	if d.joined {
		var err error
		if d.joined, err = pidsCgroup(p); err != nil {
			return err
		}
		d.noCgroup = !d.joined
	}
	if err := createMemoryCgroup(p); err != nil {
		return err
	}
	d.outR, d.outW = d.pipe()
	d.errR, d.errW = d.pipe()
	d.statusR, d.statusW = d.pipe()
	d.exitR, d.exitW = d.pipe()
	d.syncR, d.syncW = d.pipe()
	if d.syncW == nil || d.outW == nil || d.errW == nil || d.statusW == nil || d.exitW == nil {
		return fmt.Errorf("%w: pipe: too many open files?", spec.ErrLaunch)
	}
	// Bigger pipes cut context switches on floods; Fd() would make the
	// read ends blocking, out of the poller.
	capture.GrowPipe(d.outR, 1<<20)
	capture.GrowPipe(d.errR, 1<<20)
	if d.pio.Stdin != nil {
		d.stdin, d.stdinW = d.pipe()
	} else if f, err := os.Open(os.DevNull); err == nil {
		d.stdin = f
		d.closers = append(d.closers, f)
	}
	if d.stdin == nil {
		return fmt.Errorf("%w: stdin", spec.ErrLaunch)
	}
	d.fds = program.NoFDs()
	d.fds.Stdin, d.fds.Stdout, d.fds.Stderr = int(d.stdin.Fd()), int(d.outW.Fd()), int(d.errW.Fd())
	d.fds.Status, d.fds.Exit, d.fds.Sync = int(d.statusW.Fd()), int(d.exitW.Fd()), int(d.syncR.Fd())
	if p.PrivateTmp != "" {
		// The janitor reaches the private directory through its parent
		// (see program.Prepared.janitor), which the namespace's covers hide.
		if f, err := os.OpenFile(filepath.Dir(p.PrivateTmp), unix.O_PATH|unix.O_DIRECTORY, 0); err == nil {
			d.closers = append(d.closers, f)
			d.fds.Janitor = int(f.Fd())
		}
	}
	if p.MemoryCgroup != "" {
		// The command joins the cgroup through it (program.confinement).
		f, err := os.OpenFile(filepath.Dir(p.MemoryCgroup), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("%w: memory cgroup: %v", spec.ErrLaunch, err)
		}
		d.closers = append(d.closers, f)
		d.fds.MemCgroup = int(f.Fd())
	}
	if d.joined {
		if f, err := os.OpenFile(filepath.Dir(p.PidsCgroup), unix.O_PATH|unix.O_DIRECTORY, 0); err == nil {
			d.closers = append(d.closers, f)
			d.fds.Cgroup = int(f.Fd())
			// A v1 hierarchy (it has tasks files): init joins by itself
			// (program.FDs.JoinPids).
			d.fds.JoinPids = host.PidsCgroupV1(p.PidsCgroup)
		}
	}
	if d.p.Seccomp.Listener() {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("%w: socketpair: %v", spec.ErrLaunch, err)
		}
		d.sockParent = os.NewFile(uintptr(pair[0]), "notify-parent")
		d.sockChild = os.NewFile(uintptr(pair[1]), "notify-child")
		d.closers = append(d.closers, d.sockParent, d.sockChild)
		d.fds.Notify = pair[1]
	}
	return nil
}

// prepare builds the Landlock ruleset, the seccomp filter and the program
// the init runs. The caller closes the ruleset.
func (d *direct) prepare() (*landlock.Ruleset, error) {
	p := d.p
	var deferred func(path string) bool
	if d.ns {
		// The command sees the /proc of its own PID namespace.
		deferred = func(path string) bool { return strings.HasPrefix(path, "/proc/") }
	}
	rs, err := landlock.Prepare(p.Landlock, p.LandlockGuarded(), deferred)
	if err != nil {
		return nil, fmt.Errorf("%w: landlock: %v", spec.ErrLaunch, err)
	}
	d.fds.Ruleset = rs.FD
	fail := func(err error) (*landlock.Ruleset, error) {
		rs.Close()
		return nil, err
	}
	filter, err := seccomp.Cached(p.Seccomp)
	if err != nil {
		return fail(fmt.Errorf("%w: seccomp: %v", spec.ErrLaunch, err))
	}
	d.privileged = program.Privileged()
	var b *program.Prepared
	if d.ns {
		layout := nsinit.PlanLayout(p, func(path string) (string, bool) {
			r := rs.Resolved[path]
			return r.Path, r.Dir
		})
		var lerr error
		if layout.Stage, lerr = nsinit.FindStage(); lerr != nil {
			return fail(&errNamespaces{host.ExplainNamespaceFailure("namespace set-up failed: " + lerr.Error())})
		}
		d.private = program.PrivateRules(rs, layout)
		if d.netns = d.pio.NetPool.Take(); d.netns != nil {
			d.closers = append(d.closers, d.netns)
			d.fds.NetNS = int(d.netns.Fd())
		}
		b, err = program.ForNamespaces(p, d.fds, rs, layout, filter)
	} else {
		b, err = program.ForCore(p, d.fds, filter, d.privileged, selfExe)
	}
	if err != nil {
		return fail(fmt.Errorf("%w: %v", spec.ErrLaunch, err))
	}
	d.b = b
	// Without namespaces, an unprivileged init's rm could not remove what
	// the command made unreadable to itself: the launcher does it.
	d.detach = d.pio.DetachCleanup && b.P.HasJanitor() && (d.ns || d.privileged)
	b.P.JanitorAfterReport = d.detach
	return rs, nil
}

// reap kills and reaps the init of a start that failed.
func (d *direct) reap() {
	_ = unix.Kill(d.pid, unix.SIGKILL)
	var ws unix.WaitStatus
	_, _ = unix.Wait4(d.pid, &ws, unix.WALL, nil)
}

// start clones the init, maps its ids, puts it in the pids cgroup, lets it
// go and waits until the command exec'd. A command that could not start
// gives an Outcome with its start failure; a set-up failure an error.
func (d *direct) start() (*Outcome, error) {
	p, prog := d.p, d.b.P
	// The supervisor's handlers for calls that name another process, and
	// its fork count, need the init's identity: its pidfd, from the clone.
	prog.WantPidfd = p.Seccomp.Listener()
	var pid int
	var err error
	if d.netns != nil {
		err = d.pio.NetPool.Join(d.netns, func() (e error) { pid, e = prog.Start(); return e })
		if errors.Is(err, nsinit.ErrNetPool) {
			if pid > 0 {
				d.pid = pid
				d.reap()
			}
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
	} else {
		pid, err = prog.Start()
	}
	for _, f := range []*os.File{d.stdin, d.outW, d.errW, d.statusW, d.exitW, d.syncR} {
		f.Close()
	}
	if d.sockChild != nil {
		d.sockChild.Close()
	}
	if err != nil {
		if !d.ns {
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
		return nil, &errNamespaces{fmt.Sprintf("user namespaces unavailable: clone(CLONE_NEWUSER|CLONE_NEWPID|CLONE_NEWNS|CLONE_NEWNET|CLONE_NEWIPC|CLONE_NEWUTS): %v", errors.Unwrap(err))}
	}
	d.pid = pid
	if d.p.Seccomp.Listener() {
		ifd := prog.TakePidfd()
		if ifd < 0 {
			d.reap()
			return nil, fmt.Errorf("%w: clone(CLONE_PIDFD) gave no pidfd of the init", spec.ErrLaunch)
		}
		d.runInit = &notify.Init{Pid: pid, Pidfd: ifd}
	}
	if d.ns {
		if err := mapIDs(pid, p.Namespaces); err != nil {
			d.reap()
			return nil, &errNamespaces{host.ExplainNamespaceFailure("namespace set-up failed: " + err.Error())}
		}
	}
	if d.joined && !d.fds.JoinPids {
		// Init waits for the go-ahead below, so it is counted before it
		// can fork anything.
		if err := os.WriteFile(p.PidsCgroup+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0); err != nil {
			d.reap()
			return nil, fmt.Errorf("%w: join pids cgroup %s: %v", spec.ErrLaunch, p.PidsCgroup, err)
		}
	}
	if _, err := d.syncW.Write([]byte{1}); err != nil {
		d.reap()
		return nil, fmt.Errorf("%w: release init: %v", spec.ErrLaunch, err)
	}
	if !d.detach || p.MemoryCgroup == "" {
		// Detached with a memory cgroup, init's janitor waits for EOF
		// here before it removes the cgroup: the launcher closes it once
		// it has read the peak and the OOM kills (supervise).
		d.syncW.Close()
	}

	// EOF: the command exec'd (close-on-exec) or the child gave up.
	_, _ = io.Copy(io.Discard, d.statusR)
	// The listener the command sent before its exec is queued on the
	// socket by now (every end of it in the children is closed): taken
	// after the exec, one wake-up of this thread serves both.
	d.listener = -1
	if d.p.Seccomp.Listener() {
		if fd, err := spawn.RecvFD(d.sockParent); err == nil {
			d.listener = fd
		}
	}
	if f := prog.Failure(); f != nil {
		d.reap()
		if d.listener >= 0 {
			unix.Close(d.listener)
		}
		if d.b.InInit(f.Step) {
			if !d.ns {
				return nil, fmt.Errorf("%w: init: %s: %v", spec.ErrLaunch, d.b.Describe(f.Step), f.Errno)
			}
			return nil, &errNamespaces{host.ExplainNamespaceFailure(fmt.Sprintf("namespace set-up failed: %s: %v", d.b.Describe(f.Step), f.Errno))}
		}
		code, msg := d.b.StartFailure(p.Path, f)
		return &Outcome{Report: plan.Report{StartCode: code, StartErr: msg}}, nil
	}
	if d.p.Seccomp.Listener() && d.listener < 0 {
		d.reap()
		return nil, fmt.Errorf("%w: the command exec'd without handing over its seccomp listener", spec.ErrLaunch)
	}
	return nil, nil
}

// event is what the supervision hears from the init: its exit (w) or
// one of its status reports (r).
type event struct {
	w *proctree.Exit
	r *reported
}

// reported is one status report of the init.
type reported struct {
	st spawn.Status
	ok bool
}

// supervise serves the notifications, enforces the deadline and ctx,
// ends the tree, and turns the init's report into the Outcome.
func (d *direct) supervise(ctx context.Context) (*Outcome, error) {
	p := d.p
	streams := startStreams(d.pio, d.outR, d.errR, d.stdinW)
	stats := &notify.Stats{}
	cfg := notify.Config{Plan: p, Init: d.runInit, Stats: stats, Egress: egressConfig(p, d.pio.Egress)}
	if d.p.Seccomp.NotifyCreate {
		cfg.Create = &notify.Create{InRoot: d.private}
	}
	stopNotify := notify.Start(d.listener, cfg)
	events, exits := d.events()

	rep := plan.Report{Namespaces: d.ns}
	w, r, exited := d.wait(ctx, &rep, events)
	if !exited {
		// Its stacks are in this process: release them once it is gone.
		d.keepProg = true
		prog := d.b.P
		go func() {
			<-exits
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
		if w.Status.Signaled() {
			rep.Signal = int(w.Status.Signal())
		}
		rep.UserCPU = time.Duration(w.Usage.Utime.Nano())
		rep.SysCPU = time.Duration(w.Usage.Stime.Nano())
		rep.MaxRSSKB = w.Usage.Maxrss
	}
	if ms, err := memoryStats(d.p); err == nil && d.p.MemoryCgroup != "" {
		rep.MemoryPeak, rep.OOMKilled = ms.Peak, ms.OOMKills > 0
	}
	// Read: a detached init's janitor may remove the memory cgroup now.
	d.syncW.Close()
	stopNotify()
	for _, dn := range stats.Denials() {
		rep.Denials = append(rep.Denials, spec.Denial{Syscall: dn.Syscall, Path: dn.Path, Errno: unix.ErrnoName(dn.Errno), Reason: dn.Reason})
	}
	stdout, stderr, cerr := streams()
	out := &Outcome{Report: rep, Stdout: stdout, Stderr: stderr, CleanupDetached: !exited && d.detach, NoPidsCgroup: d.noCgroup}
	if cerr != nil {
		return out, fmt.Errorf("%w: capture: %v", spec.ErrLaunch, cerr)
	}
	return out, nil
}

// events starts the two sources the supervision hears: init's exit, and
// its reports. Init reports once every process of the tree is gone (a
// subreaper init first says when some outlived the command: Pending); EOF
// without a report means it was killed. exits is closed once init was
// reaped, for what must wait for it after the supervision.
func (d *direct) events() (events <-chan event, exits <-chan struct{}) {
	c := make(chan event, 3)
	gone := make(chan struct{})
	go func() {
		w := <-proctree.WaitPid(d.pid)
		close(gone)
		c <- event{w: &w}
	}()
	go func() {
		for {
			var b [spawn.StatusSize]byte
			n, _ := io.ReadFull(d.exitR, b[:])
			st, ok := spawn.ParseStatus(b[:n])
			c <- event{r: &reported{st, ok}}
			if !ok || st.Pending == 0 {
				return
			}
		}
	}()
	return c, gone
}

// wait runs the run to its end through the supervision loop: the
// deadline and ctx terminate it, what outlives the command is killed,
// until the init reported (and, where it matters, exited). It fills rep's
// Killed, TimedOut and Cancelled.
func (d *direct) wait(ctx context.Context, rep *plan.Report, events <-chan event) (proctree.Exit, reported, bool) {
	p, pid := d.p, d.pid
	// A namespace ends with its init; a subreaper init's descendants are
	// swept until it reports that none is left.
	sup := &proctree.Supervision{End: proctree.EndTree(pid, p.KillGrace), Deadline: time.Now().Add(p.WallTime), Done: ctx.Done()}
	if d.ns {
		sup.End = proctree.EndNamespace(pid, p.KillGrace)
	}
	if p.MemoryWatch > 0 {
		sup.Memory = proctree.WatchMemory(pid, p.MemoryWatch)
	}
	var w proctree.Exit
	var r reported
	exited, reportDone := false, false
	// Once init has reported, the tree is gone; init's exit (for a
	// namespace, its teardown: an RCU grace period for the mounts) need
	// not be waited for, unless init is in the pids cgroup this run
	// removes (it is never in the memory cgroup). Detached, init's janitor
	// cleans up after us.
	proctree.Supervise(sup, events, func(e event) bool {
		switch {
		case e.w != nil:
			w, exited = *e.w, true
		case e.r.ok && e.r.st.Pending != 0:
			sup.End.Kill()
			return false
		default:
			r, reportDone = *e.r, true
		}
		return exited && reportDone || reportDone && r.ok && (d.detach || !d.joined)
	})
	rep.TimedOut, rep.Cancelled, rep.Killed = sup.TimedOut, sup.Cancelled, sup.Killed
	rep.MemoryOver, rep.MemoryPeak = sup.OverMemory, sup.Memory.Peak()
	return w, r, exited
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
