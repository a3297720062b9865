package spawn

import (
	"io"
	"os"
	"runtime"
	"strings"
	"syscall"
	"testing"

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
