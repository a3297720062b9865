//go:build linux

package inside

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/program"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// initMain is our init inside bubblewrap: pid 1 of the run's PID
// namespace, which bwrap set up. It starts the command (startCommand) with
// the plan's confinement (plus the private tmpfs directories as writable
// roots), and then stays as a tiny init: it reaps orphans, forwards
// SIGTERM, SIGINT, SIGHUP and SIGQUIT to the command, and when the command
// is over writes its status (and how many processes outlived it) on fd 6
// and exits. The kernel then kills whatever is left in the namespace.
//
// It must not become the command: the init of a PID namespace ignores
// every signal it has no handler for, so `kill -TERM $$` would do nothing,
// and it would inherit every orphan.
func initMain(p *plan.Plan, status *os.File) int {
	exitPipe := os.NewFile(6, "exit")
	if exitPipe == nil {
		fmt.Fprintf(status, "%d %s", 125, "bubblewrap's init started without its exit pipe")
		return 125
	}
	unix.CloseOnExec(6)
	notify := p.Seccomp.Listener()
	if notify {
		unix.CloseOnExec(5)
	}
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(status, "%d "+format, append([]any{code}, a...)...)
		return code
	}
	// bwrap made the namespaces, the mounts and this session
	// (--new-session); only the private tmpfs mounts it made are left to
	// grant, besides the plan's roots (the plan itself is not changed).
	private := nsinit.PlanLayout(p, nil).WritablePrivate()
	// The ambient capabilities were for the set-up above; the command's
	// confinement drops every other one.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fail(125, "clear ambient capabilities: %v", err)
	}

	// Handlers before the command exists, so none of these is lost.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT)

	cmd, code, msg := startCommand(p, private, notify)
	// Only the command may hold these now: the supervisor reads the status
	// until it is closed, and waits for the listener on the socket.
	if notify {
		unix.Close(5)
	}
	if cmd == 0 {
		return fail(code, "%s", msg)
	}
	status.Close()

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

// startCommand starts the command as this init's child with the prepared
// program (program.ForBwrap) and waits until it exec'd. It returns the
// command's pid, or 0 with the exit status and message of why it never
// started. private are the writable private mounts Landlock grants
// besides the plan's writable roots.
func startCommand(p *plan.Plan, private []string, notify bool) (int, int, string) {
	pol := p.Landlock
	pol.ReadWrite = append(slices.Clone(pol.ReadWrite), private...)
	rs, err := landlock.Prepare(pol, p.LandlockGuarded(), nil)
	if err != nil {
		return 0, 125, "landlock: " + err.Error()
	}
	defer rs.Close()
	filter, err := seccomp.Build(p.Seccomp)
	if err != nil {
		return 0, 125, "seccomp: " + err.Error()
	}
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, 125, "pipe: " + err.Error()
	}
	defer statusR.Close()
	fds := program.NoFDs()
	fds.Stdin, fds.Stdout, fds.Stderr, fds.Status, fds.Ruleset = 0, 1, 2, int(statusW.Fd()), rs.FD
	if notify {
		fds.Notify = 5
	}
	b, err := program.ForBwrap(p, fds, filter, program.Privileged())
	if err != nil {
		statusW.Close()
		return 0, 125, err.Error()
	}
	pid, err := b.P.Start()
	statusW.Close()
	if err != nil {
		return 0, 125, err.Error()
	}
	// EOF: the command exec'd (close-on-exec) or gave up and exited; it
	// no longer runs on memory it shares with this process either way.
	_, _ = io.Copy(io.Discard, statusR)
	defer b.P.Close()
	if f := b.P.Failure(); f != nil {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		code, msg := b.StartFailure(p.Path, f)
		return 0, code, msg
	}
	return pid, 0, ""
}
