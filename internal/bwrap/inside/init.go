package inside

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
)

// initMain is our init inside bubblewrap: pid 1 of the run's PID
// namespace, which bwrap set up. It starts stage-3 with the plan (plus the
// private tmpfs directories as writable roots), hands it the status pipe
// and the seccomp socket, and then stays as a tiny init: it reaps orphans, forwards SIGTERM, SIGINT,
// SIGHUP and SIGQUIT to the command, and when the command is over writes
// its status (and how many processes outlived it) on fd 6 and exits. The
// kernel then kills whatever is left in the namespace.
//
// It must not become the command: the init of a PID namespace ignores
// every signal it has no handler for, so `kill -TERM $$` would do nothing,
// and it would inherit every orphan.
func initMain(p *plan.Plan, status *os.File) int {
	exitPipe := os.NewFile(6, "exit")
	if exitPipe == nil {
		fmt.Fprintf(status, "%d %s", 125, "stage-2 started without its exit pipe")
		return 125
	}
	unix.CloseOnExec(6)
	notify := p.Seccomp.Effective(true).Listener()
	if notify {
		unix.CloseOnExec(5)
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(status, "%d "+format, append([]any{code}, a...)...)
		return code
	}
	if p.Namespaces.Bwrap == "" {
		// Only bubblewrap starts this init; the namespaces provider's is
		// cloned by the launcher (package spawn).
		return fail(125, "stage-2 init started without bubblewrap")
	}
	// bwrap made the namespaces, the mounts and this session
	// (--new-session); only the private tmpfs mounts it made are left to
	// grant.
	p.Landlock.ReadWrite = append(p.Landlock.ReadWrite, nsinit.PlanLayout(p.Namespaces, nsinit.PlanRoots(p), nil).WritablePrivate()...)
	// The ambient capabilities were for the set-up above; stage-3 drops
	// every other one itself.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fail(125, "clear ambient capabilities: %v", err)
	}

	// Handlers before the command exists, so none of these is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)

	planR, planW, err := os.Pipe()
	if err != nil {
		return fail(125, "pipe: %v", err)
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr, planR, status}
	if notify {
		files = append(files, os.NewFile(5, "notify"))
	}
	proc, err := os.StartProcess("/proc/self/exe", []string{Stage3Arg0}, &os.ProcAttr{
		Files: files,
		Env:   []string{},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	planR.Close()
	if err != nil {
		planW.Close()
		return fail(125, "start stage-3: %v", err)
	}
	cmd := proc.Pid
	_ = proc.Release()
	// Only stage-3 may hold these now: the supervisor reads the status
	// until stage-3's exec closes it, and waits for the listener on the
	// socket.
	status.Close()
	if notify {
		unix.Close(5)
	}
	werr := plan.Write(planW, p)
	planW.Close()
	if werr != nil {
		_ = unix.Kill(cmd, unix.SIGKILL)
	}

	go func() {
		for s := range sigs {
			_ = unix.Kill(cmd, s.(unix.Signal))
		}
	}()

	var st plan.InitStatus
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			st = plan.InitStatus{ExitCode: 125}
			break
		}
		if pid != cmd {
			continue // an orphan
		}
		switch {
		case ws.Exited():
			st.ExitCode = ws.ExitStatus()
		case ws.Signaled():
			st.ExitCode, st.Signal = -1, int(ws.Signal())
		}
		st.Survivors = survivors()
		break
	}
	b, _ := json.Marshal(st)
	_, _ = exitPipe.Write(b)
	exitPipe.Close()
	if st.Signal != 0 {
		return 128 + st.Signal
	}
	return st.ExitCode & 0xff
}

// survivors counts the live processes of the PID namespace besides this
// init: what outlived the command, and is killed when init exits.
func survivors() int {
	d, err := os.Open("/proc")
	if err != nil {
		return 0
	}
	defer d.Close()
	names, _ := d.Readdirnames(-1)
	n := 0
	buf := make([]byte, 512)
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid == 1 {
			continue
		}
		if !zombie(pid, buf) {
			n++
		}
	}
	return n
}

func zombie(pid int, buf []byte) bool {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return true // gone
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return true
	}
	b := buf[:n]
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == ')' {
			return i+2 < len(b) && b[i+2] == 'Z'
		}
	}
	return false
}
