//go:build linux

package supervise

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/bwrap"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/spawn"
)

// startBwrap starts the command for the bubblewrap provider: bwrap creates the
// namespaces and the mount tree and execs this binary inside as the PID
// namespace's init (bwrap.InitPath), which starts the confining re-exec as under
// landlock+namespaces. The descriptors are those of the run's init plus the run's
// stderr and the binary to bind; bwrap's own stderr is a pipe, so that a
// bwrap failure is this run's error, not the command's output. Any failure
// refuses the run: an explicitly chosen backend never falls back.
//
// The steps: open the descriptors (open), start bwrap inside the run's pids
// cgroup (spawn), then hand over the plan and wait until the command
// exec'd (handshake).
func startBwrap(p *plan.Plan) (pid, notifyFD int, exitPipe *os.File, err error) {
	b := &bwrapStart{p: p}
	defer b.close()
	if err := b.open(); err != nil {
		return 0, -1, nil, err
	}
	if pid, err = b.spawn(); err != nil {
		return pid, -1, nil, err
	}
	notifyFD, exitPipe, err = b.handshake()
	return pid, notifyFD, exitPipe, err
}

// bwrapStart is one start of bwrap: the descriptors it gets and those
// this side keeps.
type bwrapStart struct {
	p *plan.Plan

	exe                   *os.File // this binary, to bind
	closers               []*os.File
	planR, planW          *os.File
	statusR, statusW      *os.File
	exitR, exitW          *os.File
	errR, errW            *os.File
	sockParent, sockChild *os.File // nil without a seccomp listener
	wantNotify            bool
}

// bwrapFail is startBwrap's refusal.
func bwrapFail(format string, a ...any) error {
	return &startError{code: 125, msg: "bubblewrap: " + fmt.Sprintf(format, a...)}
}

// close closes every descriptor not handed on (keep).
func (b *bwrapStart) close() {
	if b.exe != nil {
		b.exe.Close()
	}
	for _, f := range b.closers {
		if f != nil {
			f.Close()
		}
	}
}

// keep takes f out of what close closes.
func (b *bwrapStart) keep(f *os.File) {
	for i, c := range b.closers {
		if c == f {
			b.closers[i] = nil
		}
	}
}

// open opens this binary, the pipes and, when the run has a listener,
// the socket pair it is handed over on.
func (b *bwrapStart) open() error {
	exe, err := os.OpenFile("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return bwrapFail("open this binary to bind it: %v", err)
	}
	b.exe = exe
	for _, pp := range []struct{ r, w **os.File }{
		{&b.planR, &b.planW}, {&b.statusR, &b.statusW}, {&b.exitR, &b.exitW}, {&b.errR, &b.errW},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			return bwrapFail("%v", err)
		}
		b.closers = append(b.closers, r, w)
		*pp.r, *pp.w = r, w
	}
	// bubblewrap's runs have a PID namespace.
	b.wantNotify = b.p.Seccomp.Listener()
	if b.wantNotify {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return bwrapFail("socketpair: %v", err)
		}
		b.sockParent = os.NewFile(uintptr(fds[0]), "notify-parent")
		b.sockChild = os.NewFile(uintptr(fds[1]), "notify-child")
		b.closers = append(b.closers, b.sockParent, b.sockChild)
	}
	return nil
}

// spawn starts bwrap, inside the run's pids cgroup when it has one, and
// closes bwrap's ends of the descriptors.
func (b *bwrapStart) spawn() (int, error) {
	p := b.p
	files := []*os.File{os.Stdin, os.Stdout, b.errW, b.planR, b.statusW, b.sockChild, b.exitW, os.Stderr, b.exe}
	if len(files) != bwrap.ExeFD+1 {
		return 0, bwrapFail("descriptor layout")
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 && p.UID > 0 {
		// bwrap maps only the uid it runs as: run it as the command's
		// owner, whose files it then creates, as under the other
		// providers.
		sys.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
	}
	leave, err := joinPidsCgroup(p.PidsCgroup)
	if err != nil {
		return 0, bwrapFail("join pids cgroup %s: %v", p.PidsCgroup, err)
	}
	args := append([]string{"bwrap"}, bwrap.Args(p)...)
	proc, err := os.StartProcess(p.Namespaces.Bwrap, args, &os.ProcAttr{Files: files, Env: []string{}, Sys: sys})
	leave(err == nil)
	// Only bwrap's side may hold these now, so EOF means it is done with
	// them.
	for _, f := range []*os.File{b.planR, b.statusW, b.exitW, b.errW, b.sockChild} {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		return 0, bwrapFail("start %s: %v", p.Namespaces.Bwrap, err)
	}
	pid := proc.Pid
	_ = proc.Release()
	return pid, nil
}

// joinPidsCgroup moves this supervisor into the run's pids cgroup for
// bwrap's fork (bwrap forks at once, so it must start inside; nothing to
// do without a cgroup); leave takes it out again, reporting a failure on
// stderr when the start succeeded. CLONE_INTO_CGROUP would need cgroup v2.
// On v1 only the thread that forks moves ("0" into tasks: no global lock
// and RCU wait, as a pid written to cgroup.procs costs); v2 has only
// cgroup.procs, and moves the process.
func joinPidsCgroup(cg string) (leave func(started bool), err error) {
	if cg == "" {
		return func(bool) {}, nil
	}
	join, self := "cgroup.procs", []byte(strconv.Itoa(os.Getpid()))
	v1 := host.PidsCgroupV1(cg)
	if v1 {
		join, self = "tasks", []byte("0")
		// Unlocked once it is out again (leave).
		runtime.LockOSThread()
	}
	back, err := ownCgroup(cg)
	if err == nil {
		err = os.WriteFile(filepath.Join(cg, join), self, 0)
	}
	if err != nil {
		if v1 {
			runtime.UnlockOSThread()
		}
		return nil, err
	}
	return func(started bool) {
		// Out at once: the supervisor's threads must not count against
		// (or be refused by) the run's bound.
		if werr := os.WriteFile(filepath.Join(back, join), self, 0); werr != nil && started {
			fmt.Fprintf(os.Stderr, "confine: supervisor: leave the run's pids cgroup: %v\n", werr)
		}
		if v1 {
			runtime.UnlockOSThread()
		}
	}, nil
}

// handshake writes the plan to the init inside bwrap, takes the seccomp
// listener, and waits until the command exec'd: its start failure, or
// bwrap's, is the error. It returns the listener (-1 for none) and the
// pipe the init reports the command's status on.
func (b *bwrapStart) handshake() (notifyFD int, exitPipe *os.File, err error) {
	werr := plan.Write(b.planW, b.p)
	b.planW.Close()

	notifyFD = -1
	if b.wantNotify && werr == nil {
		if notifyFD, err = spawn.RecvFD(b.sockParent); err != nil {
			notifyFD = -1
		}
	}
	closeNotify := func() {
		if notifyFD >= 0 {
			unix.Close(notifyFD)
		}
	}
	msg, rerr := readAll(b.statusR)
	if rerr != nil {
		closeNotify()
		return -1, nil, bwrapFail("read the init's status: %v", rerr)
	}
	if len(msg) > 0 {
		closeNotify()
		code, text, ok := strings.Cut(string(msg), " ")
		var c int
		if _, err := fmt.Sscanf(code, "%d", &c); !ok || err != nil || c == plan.CodeNamespaces {
			c, text = 125, string(msg)
		}
		return -1, nil, &startError{code: c, msg: text}
	}
	// The status pipe closes without a word both when the confining re-exec exec'd the
	// command and when bwrap died before the init ran: the init's ready
	// byte tells them apart.
	var rb [1]byte
	if n, _ := b.exitR.Read(rb[:]); n != 1 || rb[0] != bwrap.Ready {
		closeNotify()
		out, _ := io.ReadAll(io.LimitReader(b.errR, 4096))
		why := strings.TrimSpace(string(out))
		if why == "" {
			why = "bwrap exited before the sandbox's init ran"
		}
		return -1, nil, bwrapFail("%s", why)
	}
	if werr != nil {
		closeNotify()
		return -1, nil, werr
	}
	if b.wantNotify && notifyFD < 0 {
		return -1, nil, errors.New("the confining re-exec exec'd without handing over its seccomp listener")
	}
	// Whatever bwrap says later belongs on the run's stderr.
	errFile := b.errR
	go func() {
		_, _ = io.Copy(os.Stderr, errFile)
		errFile.Close()
	}()
	b.keep(b.errR)
	b.keep(b.exitR)
	return notifyFD, b.exitR, nil
}

// ownCgroup is the directory of the supervisor's own cgroup in the
// hierarchy that holds runCgroup (a child of that hierarchy's root).
func ownCgroup(runCgroup string) (string, error) {
	root := filepath.Dir(runCgroup)
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	v1 := filepath.Base(root) == "pids"
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		ctrls := strings.Split(f[1], ",")
		if v1 && slices.Contains(ctrls, "pids") || !v1 && f[0] == "0" && f[1] == "" {
			return filepath.Join(root, f[2]), nil
		}
	}
	return "", errors.New("own cgroup not found in /proc/self/cgroup")
}
