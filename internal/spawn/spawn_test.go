//go:build linux

package spawn

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// run starts p with a pipe at FDStatus and stdout, waits for it and returns
// what it printed, its wait status and its failure report.
func run(t *testing.T, p *Program) (string, syscall.WaitStatus, *Failure) {
	t.Helper()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p.Cmd = append([]Op{Call(1, unix.SYS_DUP3, outW.Fd(), 1, 0)}, p.Cmd...)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := p.Start()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	b, _ := io.ReadAll(outR)
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	return string(b), ws, p.Failure()
}

func TestProgram(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cmd      func(p *Program) []Op
		argv     []string
		wantOut  string
		wantStep Step
		wantErr  syscall.Errno
	}{
		{name: "exec", argv: []string{"/bin/echo", "hi"}, wantOut: "hi\n"},
		{name: "chdir", argv: []string{"/bin/pwd"}, wantOut: "/usr\n",
			cmd: func(p *Program) []Op { return []Op{Call(2, unix.SYS_CHDIR, p.Str("/usr"))} }},
		{name: "failed op", argv: []string{"/bin/true"}, wantStep: 7, wantErr: syscall.ENOENT,
			cmd: func(p *Program) []Op { return []Op{Call(7, unix.SYS_CHDIR, p.Str("/nonexistent-spawn-test"))} }},
		{name: "accepted errno", argv: []string{"/bin/echo", "ok"}, wantOut: "ok\n",
			cmd: func(p *Program) []Op {
				return []Op{Call(7, unix.SYS_CHDIR, p.Str("/nonexistent-spawn-test")).OK(syscall.ENOENT)}
			}},
		{name: "skipped optional", argv: []string{"/bin/echo", "skipped"}, wantOut: "skipped\n",
			cmd: func(p *Program) []Op {
				return []Op{
					Call(7, unix.SYS_OPENAT, AtFDCWD, p.Str("/nonexistent-spawn-test"), unix.O_PATH).SkipOn(syscall.ENOENT, 1),
					Call(8, unix.SYS_CHDIR, p.Str("/nonexistent-either")),
				}
			}},
		{name: "want", argv: []string{"/bin/true"}, wantStep: 9,
			cmd: func(p *Program) []Op { return []Op{Call(9, unix.SYS_GETPID).Want(1)} }},
		{name: "slots", argv: []string{"/bin/pwd"}, wantOut: "/etc\n",
			cmd: func(p *Program) []Op {
				return []Op{
					Call(3, unix.SYS_OPENAT, AtFDCWD, p.Str("/etc"), unix.O_PATH|unix.O_DIRECTORY).ToSlot(2),
					Call(4, unix.SYS_FCHDIR, 0).FromSlot(2, 0),
				}
			}},
		{name: "check zero passes", argv: []string{"/bin/echo", "zero"}, wantOut: "zero\n",
			cmd: func(p *Program) []Op {
				b := make([]byte, 24)
				p.Keep(b)
				return []Op{CheckZero(5, b)}
			}},
		{name: "check zero sees what a call wrote", argv: []string{"/bin/true"}, wantStep: 6,
			cmd: func(p *Program) []Op {
				// pipe2 writes two descriptors (never 0: stdin is open)
				// into b, which the check must then refuse.
				b := make([]byte, 8)
				p.Keep(b)
				return []Op{Call(5, unix.SYS_PIPE2, uintptr(unsafe.Pointer(&b[0])), 0), CheckZero(6, b)}
			}},
		{name: "exec fails", argv: []string{"/nonexistent-spawn-test"}, wantStep: StepExec, wantErr: syscall.ENOENT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Program{}
			if err := p.SetExec(tc.argv[0], tc.argv, []string{"PATH=/usr/bin:/bin"}); err != nil {
				t.Fatal(err)
			}
			if tc.cmd != nil {
				p.Cmd = tc.cmd(p)
			}
			out, ws, f := run(t, p)
			if tc.wantStep == 0 {
				if f != nil || !ws.Exited() || ws.ExitStatus() != 0 || out != tc.wantOut {
					t.Fatalf("got %q, %v, failure %v; want %q", out, ws, f, tc.wantOut)
				}
				return
			}
			if f == nil || f.Step != tc.wantStep || f.Errno != tc.wantErr || ws.ExitStatus() != 1 {
				t.Fatalf("failure %v, status %v; want step %d errno %v", f, ws, tc.wantStep, tc.wantErr)
			}
		})
	}
}

// TestInit runs the command under an init in new user and PID namespaces:
// init reports the command's status and kills (and counts) what outlived it.
func TestInit(t *testing.T) {
	if err := unix.Unshare(0); err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		script  string
		code    int32
		sig     int32
		surv    int32
		wantOut string
	}{
		{script: "echo $$", wantOut: "2\n"},
		{script: "exit 3", code: 3},
		{script: "kill -9 $$", code: -1, sig: 9},
		{script: "setsid sleep 100 & sleep 100 & echo started", wantOut: "started\n", surv: 2},
	} {
		t.Run(tc.script, func(t *testing.T) {
			p := &Program{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWPID}
			if err := p.SetExec("/bin/sh", []string{"sh", "-c", tc.script}, []string{"PATH=/usr/bin:/bin"}); err != nil {
				t.Fatal(err)
			}
			exitR, exitW, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer exitR.Close()
			p.Init = []Op{Call(1, unix.SYS_DUP3, exitW.Fd(), FDExit, 0)}
			out, ws, f := run(t, p)
			exitW.Close()
			if f != nil || !ws.Exited() || ws.ExitStatus() != 0 {
				t.Fatalf("init: %v, failure %v", ws, f)
			}
			b, _ := io.ReadAll(exitR)
			st, ok := ParseStatus(b)
			if !ok {
				t.Fatalf("init reported %d bytes, want %d", len(b), StatusSize)
			}
			got := [3]int32{int32(st.Code), int32(st.Signal), int32(st.Survivors)}
			if st.MaxRSSKB <= 0 {
				t.Errorf("init reported no usage for the tree: %+v", st)
			}
			if got != [3]int32{tc.code, tc.sig, tc.surv} || !strings.HasPrefix(out, tc.wantOut) {
				t.Fatalf("status %v out %q; want %v %q", got, out, [3]int32{tc.code, tc.sig, tc.surv}, tc.wantOut)
			}
		})
	}
}

// TestJanitor: when the launcher is gone (LauncherGone, here sent by the
// test), init kills the namespace's processes and runs the janitor instead
// of reporting.
func TestJanitor(t *testing.T) {
	if err := unix.Unshare(0); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	marker := dir + "/janitor-ran"
	p := &Program{Cloneflags: unix.CLONE_NEWUSER | unix.CLONE_NEWPID}
	if err := p.SetExec("/bin/sh", []string{"sh", "-c", "echo started; exec sleep 100"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := p.SetJanitor("/bin/sh", []string{"sh", "-c", "echo gone > " + marker}); err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer outR.Close()
	p.Init = []Op{Call(1, unix.SYS_DUP3, outW.Fd(), 1, 0)}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, err := p.Start()
	outW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	buf := make([]byte, 8)
	if n, _ := outR.Read(buf); string(buf[:n]) != "started\n" {
		t.Fatalf("command printed %q", buf[:n])
	}
	if err := unix.Kill(pid, LauncherGone); err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
	// EOF: the sleep that held the pipe is dead too.
	if n, err := outR.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("output still open after init ran the janitor: %d %v", n, err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "gone\n" || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("janitor: %q %v, init %v", b, err, ws)
	}
}

// TestSubreaper: without a PID namespace the init is a child subreaper
// that never signals; when processes outlive the command it reports
// Pending, and once the launcher killed them it reports them as survivors.
func TestSubreaper(t *testing.T) {
	p := &Program{Subreaper: true}
	if err := p.SetExec("/bin/sh", []string{"sh", "-c", "setsid sleep 100 & exit 4"}, nil); err != nil {
		t.Fatal(err)
	}
	exitR, exitW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer exitR.Close()
	p.Init = []Op{
		Call(1, unix.SYS_DUP3, exitW.Fd(), FDExit, 0),
		Call(2, unix.SYS_PRCTL, unix.PR_SET_CHILD_SUBREAPER, 1),
	}
	_, ws, f := func() (string, syscall.WaitStatus, *Failure) {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		pid, err := p.Start()
		exitW.Close()
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		var b [StatusSize]byte
		if _, err := io.ReadFull(exitR, b[:]); err != nil {
			t.Fatalf("no pending report: %v", err)
		}
		st, _ := ParseStatus(b[:])
		if st.Pending != 1 || st.Code != 4 {
			t.Fatalf("first report %+v, want Pending with exit 4", st)
		}
		// The launcher's part: kill what is left below the init (here the
		// sleep, the init's only child).
		sleeper := onlyChild(t, pid)
		if err := unix.Kill(sleeper, unix.SIGKILL); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(exitR, b[:]); err != nil {
			t.Fatalf("no final report: %v", err)
		}
		st, _ = ParseStatus(b[:])
		if st.Pending != 0 || st.Code != 4 || st.Survivors != 1 || st.MaxRSSKB <= 0 {
			t.Fatalf("final report %+v, want exit 4, 1 survivor, usage", st)
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
			t.Fatal(err)
		}
		return "", ws, p.Failure()
	}()
	if f != nil || !ws.Exited() || ws.ExitStatus() != 0 {
		t.Fatalf("init: %v, failure %v", ws, f)
	}
}

// TestJanitorAfterReportKeepsSync: after its report, init's janitor still
// holds FDSync, so it can wait there for the launcher (which reads the
// run's memory cgroup before the janitor removes it). A janitor that found
// it closed would run at once, racing the launcher.
func TestJanitorAfterReportKeepsSync(t *testing.T) {
	p := &Program{Subreaper: true, JanitorAfterReport: true}
	if err := p.SetExec("/bin/true", []string{"true"}, nil); err != nil {
		t.Fatal(err)
	}
	exitR, exitW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer exitR.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	obsR, obsW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer obsR.Close()
	// The janitor reads one byte from FDSync and passes on what it read:
	// "X" from the test, or the zero it started with if the read failed.
	buf := new([1]byte)
	p.Keep(buf)
	p.Init = []Op{
		Call(1, unix.SYS_DUP3, exitW.Fd(), FDExit, 0),
		Call(2, unix.SYS_DUP3, syncR.Fd(), FDSync, 0),
		Call(3, unix.SYS_DUP3, obsW.Fd(), FDFree, 0),
	}
	p.Janitor = []Op{
		Call(0, unix.SYS_READ, FDSync, uintptr(unsafe.Pointer(&buf[0])), 1).Ignore(),
		Call(0, unix.SYS_WRITE, FDFree, uintptr(unsafe.Pointer(&buf[0])), 1).Ignore(),
	}
	runtime.LockOSThread()
	pid, err := p.Start()
	runtime.UnlockOSThread()
	exitW.Close()
	syncR.Close()
	obsW.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var b [StatusSize]byte
	if _, err := io.ReadFull(exitR, b[:]); err != nil {
		t.Fatalf("no report: %v", err)
	}
	// Only now, after the report, does the janitor get its byte.
	if _, err := syncW.Write([]byte("X")); err != nil {
		t.Fatal(err)
	}
	syncW.Close()
	got := make([]byte, 1)
	if _, err := io.ReadFull(obsR, got); err != nil || got[0] != 'X' {
		t.Fatalf("janitor read %q (%v): FDSync was closed before it ran", got, err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil {
		t.Fatal(err)
	}
}

// onlyChild waits for pid to have exactly one child and returns it.
func onlyChild(t *testing.T, pid int) int {
	t.Helper()
	for i := 0; i < 200; i++ {
		var kids []int
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			j := strings.LastIndexByte(s, ')')
			if j < 0 {
				continue
			}
			var state byte
			var ppid int
			if _, err := fmt.Sscanf(s[j+2:], "%c %d", &state, &ppid); err == nil && ppid == pid && state != 'Z' {
				var k int
				fmt.Sscanf(e.Name(), "%d", &k)
				kids = append(kids, k)
			}
		}
		if len(kids) == 1 {
			return kids[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("init %d never had exactly one child", pid)
	return 0
}
