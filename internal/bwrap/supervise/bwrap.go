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
func startBwrap(p *plan.Plan) (pid, notifyFD int, exitPipe *os.File, err error) {
	fail := func(format string, a ...any) (int, int, *os.File, error) {
		return pid, -1, nil, &startError{code: 125, msg: "bubblewrap: " + fmt.Sprintf(format, a...)}
	}
	exe, err := os.OpenFile("/proc/self/exe", unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail("open this binary to bind it: %v", err)
	}
	defer exe.Close()
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			if f != nil {
				f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return
	}
	planR, planW, err := pipe()
	if err != nil {
		return fail("%v", err)
	}
	statusR, statusW, err := pipe()
	if err != nil {
		return fail("%v", err)
	}
	exitR, exitW, err := pipe()
	if err != nil {
		return fail("%v", err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return fail("%v", err)
	}
	var sockParent, sockChild *os.File
	// bubblewrap's runs have a PID namespace.
	wantNotify := p.Seccomp.Effective(true).Listener()
	if wantNotify {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail("socketpair: %v", err)
		}
		sockParent = os.NewFile(uintptr(fds[0]), "notify-parent")
		sockChild = os.NewFile(uintptr(fds[1]), "notify-child")
		closers = append(closers, sockParent, sockChild)
	}
	files := []*os.File{os.Stdin, os.Stdout, errW, planR, statusW, sockChild, exitW, os.Stderr, exe}
	if len(files) != bwrap.ExeFD+1 {
		return fail("descriptor layout")
	}
	sys := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 && p.UID > 0 {
		// bwrap maps only the uid it runs as: run it as the command's
		// owner, whose files it then creates, as under the other
		// providers.
		sys.Credential = &syscall.Credential{Uid: uint32(p.UID), Gid: uint32(p.GID), Groups: []uint32{}}
	}
	var back, join string
	var self []byte
	if p.PidsCgroup != "" {
		// bwrap forks at once, so it must start inside the cgroup:
		// the supervisor steps in for the fork and out again
		// (CLONE_INTO_CGROUP would need cgroup v2). On v1 only the
		// thread that forks moves ("0" into tasks: no global lock and
		// RCU wait, as a pid written to cgroup.procs costs); v2 has
		// only cgroup.procs, and moves the process.
		join = "cgroup.procs"
		if host.PidsCgroupV1(p.PidsCgroup) {
			join = "tasks"
			// Unlocked once it is out again, below.
			runtime.LockOSThread()
		}
		self = []byte(strconv.Itoa(os.Getpid()))
		if join == "tasks" {
			self = []byte("0")
		}
		if back, err = ownCgroup(p.PidsCgroup); err == nil {
			err = os.WriteFile(filepath.Join(p.PidsCgroup, join), self, 0)
		}
		if err != nil {
			if join == "tasks" {
				runtime.UnlockOSThread()
			}
			return fail("join pids cgroup %s: %v", p.PidsCgroup, err)
		}
	}
	args := append([]string{"bwrap"}, bwrap.Args(p)...)
	proc, err := os.StartProcess(p.Namespaces.Bwrap, args, &os.ProcAttr{Files: files, Env: []string{}, Sys: sys})
	if back != "" {
		// Out at once: the supervisor's threads must not count against
		// (or be refused by) the run's bound.
		if werr := os.WriteFile(filepath.Join(back, join), self, 0); werr != nil && err == nil {
			fmt.Fprintf(os.Stderr, "confine: supervisor: leave the run's pids cgroup: %v\n", werr)
		}
		if join == "tasks" {
			runtime.UnlockOSThread()
		}
	}
	// Only bwrap's side may hold these now, so EOF means it is done with
	// them.
	for _, f := range []*os.File{planR, statusW, exitW, errW, sockChild} {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		return fail("start %s: %v", p.Namespaces.Bwrap, err)
	}
	pid = proc.Pid
	_ = proc.Release()
	werr := plan.Write(planW, p)
	planW.Close()

	notifyFD = -1
	if wantNotify && werr == nil {
		if notifyFD, err = spawn.RecvFD(sockParent); err != nil {
			notifyFD = -1
		}
	}
	closeNotify := func() {
		if notifyFD >= 0 {
			unix.Close(notifyFD)
		}
	}
	msg, rerr := readAll(statusR)
	if rerr != nil {
		closeNotify()
		return fail("read the init's status: %v", rerr)
	}
	if len(msg) > 0 {
		closeNotify()
		code, text, ok := strings.Cut(string(msg), " ")
		var c int
		if _, err := fmt.Sscanf(code, "%d", &c); !ok || err != nil || c == plan.CodeNamespaces {
			c, text = 125, string(msg)
		}
		return pid, -1, nil, &startError{code: c, msg: text}
	}
	// The status pipe closes without a word both when the confining re-exec exec'd the
	// command and when bwrap died before the init ran: the init's ready
	// byte tells them apart.
	var b [1]byte
	if n, _ := exitR.Read(b[:]); n != 1 || b[0] != bwrap.Ready {
		closeNotify()
		out, _ := io.ReadAll(io.LimitReader(errR, 4096))
		why := strings.TrimSpace(string(out))
		if why == "" {
			why = "bwrap exited before the sandbox's init ran"
		}
		return fail("%s", why)
	}
	if werr != nil {
		closeNotify()
		return pid, -1, nil, werr
	}
	if wantNotify && notifyFD < 0 {
		return pid, -1, nil, errors.New("the confining re-exec exec'd without handing over its seccomp listener")
	}
	// Whatever bwrap says later belongs on the run's stderr.
	errFile := errR
	go func() {
		_, _ = io.Copy(os.Stderr, errFile)
		errFile.Close()
	}()
	keep := func(f *os.File) {
		for i, c := range closers {
			if c == f {
				closers[i] = nil
			}
		}
	}
	keep(errR)
	keep(exitR)
	return pid, notifyFD, exitR, nil
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
