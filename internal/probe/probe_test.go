//go:build linux

package probe

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// asMainEnv makes the test binary behave as the probe, so that the tests
// (and the probe's own re-executions of itself) need no separate build.
const asMainEnv = "CONFINE_PROBE_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMainEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	os.Exit(m.Run())
}

type probeReport struct {
	Vector  string `json:"vector"`
	Outcome string `json:"outcome"`
	Detail  string `json:"detail"`
}

// runProbe runs the probe with args; extra become fds 3, 4, ...
func runProbe(t *testing.T, extra []*os.File, args ...string) (probeReport, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.ExtraFiles = extra
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("probe %q: %v", args, err)
	}
	lines := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("probe %q: want exactly one stdout line, got %q (stderr %q)", args, stdout.String(), stderr.String())
	}
	var rep probeReport
	if err := json.Unmarshal([]byte(lines[0]), &rep); err != nil {
		t.Fatalf("probe %q: bad JSON %q: %v", args, lines[0], err)
	}
	wantCode := map[string]int{outEscaped: exitEscaped, outBlocked: exitBlocked, outNA: exitNA, outUsage: exitUsage}[rep.Outcome]
	if code != wantCode {
		t.Fatalf("probe %q: outcome %q but exit code %d", args, rep.Outcome, code)
	}
	return rep, code
}

func TestUsageErrors(t *testing.T) {
	type tc struct {
		name string
		args []string
	}
	var cases []tc
	for name, v := range vectors {
		if v.maxArgs >= 0 {
			args := []string{name}
			for i := 0; i <= v.maxArgs; i++ {
				args = append(args, "1")
			}
			cases = append(cases, tc{name + "/too-many", args})
		}
		if v.minArgs > 0 {
			cases = append(cases, tc{name + "/missing", []string{name}})
		}
	}
	cases = append(cases,
		tc{"no-vector", nil},
		tc{"unknown", []string{"no-such-vector"}},
		tc{"hidden-child-empty", []string{hiddenChild}},
		tc{"tcp-port-text", []string{"tcp-connect", "x"}},
		tc{"tcp-port-zero", []string{"tcp-connect", "0"}},
		tc{"tcp6-port-big", []string{"tcp6-connect", "65536"}},
		tc{"udp-port", []string{"udp-send", "-1"}},
		tc{"iouring-port", []string{"iouring-socket", "port"}},
		tc{"socketcall32-port", []string{"socketcall32", "x"}},
		tc{"x32-port", []string{"x32-syscall", "x"}},
		tc{"kill-pid", []string{"kill", "0"}},
		tc{"ptrace-pid", []string{"ptrace", "-5"}},
		tc{"vm-readv-addr", []string{"process-vm-readv", "1", "zz"}},
		tc{"proc-read-addr", []string{"proc-read", "/proc/self/mem", "xyz"}},
		tc{"chmod-mode", []string{"chmod", "/nonexistent", "99"}},
		tc{"chown-uid", []string{"chown", "/nonexistent", "u", "0"}},
		tc{"inherited-stdout", []string{"inherited-fd", "1"}},
		tc{"abstract-empty", []string{"abstract-unix", ""}},
		tc{"shm-slash", []string{"shm-write", "../etc"}},
		tc{"fork-bomb-max", []string{"fork-bomb", "-1"}},
		tc{"memory-bomb-mib", []string{"memory-bomb", "0"}},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rep, code := runProbe(t, nil, c.args...)
			if code != exitUsage || rep.Outcome != outUsage {
				t.Fatalf("probe %q: got %d %+v, want usage error", c.args, code, rep)
			}
		})
	}
}

// wantEscaped runs the probe and requires "escaped".
func wantEscaped(t *testing.T, extra []*os.File, args ...string) probeReport {
	t.Helper()
	rep, code := runProbe(t, extra, args...)
	if code != exitEscaped || rep.Outcome != outEscaped || rep.Vector != args[0] {
		t.Fatalf("probe %q: got exit %d %+v, want escaped", args, code, rep)
	}
	return rep
}

// acceptByte accepts one connection on l and returns the first byte read.
func acceptByte(l net.Listener) <-chan string {
	ch := make(chan string, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			ch <- "accept: " + err.Error()
			return
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil {
			ch <- "read: " + err.Error()
			return
		}
		ch <- string(b)
	}()
	return ch
}

func readDatagram(c net.PacketConn) string {
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	b := make([]byte, 16)
	n, _, err := c.ReadFrom(b)
	if err != nil {
		return err.Error()
	}
	return string(b[:n])
}

func TestNetworkEscapesUnconfined(t *testing.T) {
	t.Run("tcp-connect", func(t *testing.T) {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Skip(err)
		}
		defer l.Close()
		got := acceptByte(l)
		wantEscaped(t, nil, "tcp-connect", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		if b := <-got; b != "x" {
			t.Fatalf("listener got %q", b)
		}
	})
	t.Run("tcp6-connect", func(t *testing.T) {
		l, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skip(err)
		}
		defer l.Close()
		got := acceptByte(l)
		wantEscaped(t, nil, "tcp6-connect", strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
		if b := <-got; b != "x" {
			t.Fatalf("listener got %q", b)
		}
	})
	t.Run("udp-send", func(t *testing.T) {
		c, err := net.ListenPacket("udp4", "127.0.0.1:0")
		if err != nil {
			t.Skip(err)
		}
		defer c.Close()
		wantEscaped(t, nil, "udp-send", strconv.Itoa(c.LocalAddr().(*net.UDPAddr).Port))
		if b := readDatagram(c); b != "x" {
			t.Fatalf("udp listener got %q", b)
		}
	})
	t.Run("tcp-listen", func(t *testing.T) {
		wantEscaped(t, nil, "tcp-listen")
	})
	t.Run("unix-connect", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "s")
		l, err := net.Listen("unix", path)
		if err != nil {
			t.Skip(err)
		}
		defer l.Close()
		got := acceptByte(l)
		wantEscaped(t, nil, "unix-connect", path)
		if b := <-got; b != "x" {
			t.Fatalf("listener got %q", b)
		}
	})
	t.Run("abstract-unix", func(t *testing.T) {
		name := fmt.Sprintf("confine-probe-test-%d-%d", os.Getpid(), time.Now().UnixNano())
		l, err := net.Listen("unix", "@"+name)
		if err != nil {
			t.Skip(err)
		}
		defer l.Close()
		got := acceptByte(l)
		wantEscaped(t, nil, "abstract-unix", name)
		if b := <-got; b != "x" {
			t.Fatalf("listener got %q", b)
		}
	})
	t.Run("unix-dgram", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "d")
		c, err := net.ListenPacket("unixgram", path)
		if err != nil {
			t.Skip(err)
		}
		defer c.Close()
		wantEscaped(t, nil, "unix-dgram", path)
		if b := readDatagram(c); b != "x" {
			t.Fatalf("datagram socket got %q", b)
		}
	})
	t.Run("inherited-fd", func(t *testing.T) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		wantEscaped(t, []*os.File{w}, "inherited-fd", "3")
		w.Close()
		b := make([]byte, 4)
		n, _ := r.Read(b)
		if string(b[:n]) != "x" {
			t.Fatalf("pipe got %q", b[:n])
		}
	})
}

func TestFileEscapesUnconfined(t *testing.T) {
	read := func(t *testing.T, p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	seed := func(t *testing.T, content string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("write-file", func(t *testing.T) {
		p := seed(t, "old content")
		wantEscaped(t, nil, "write-file", p)
		if got := read(t, p); got != marker {
			t.Fatalf("content %q", got)
		}
	})
	t.Run("append-file", func(t *testing.T) {
		p := seed(t, "old ")
		wantEscaped(t, nil, "append-file", p)
		if got := read(t, p); got != "old "+marker {
			t.Fatalf("content %q", got)
		}
	})
	t.Run("truncate-file", func(t *testing.T) {
		p := seed(t, "some content")
		wantEscaped(t, nil, "truncate-file", p)
		if got := read(t, p); got != "" {
			t.Fatalf("content %q", got)
		}
	})
	t.Run("read-file", func(t *testing.T) {
		wantEscaped(t, nil, "read-file", seed(t, "secret"))
	})
	t.Run("read-file-missing", func(t *testing.T) {
		rep, code := runProbe(t, nil, "read-file", filepath.Join(t.TempDir(), "missing"))
		if code != exitBlocked || !strings.Contains(rep.Detail, "ENOENT") {
			t.Fatalf("got %d %+v, want blocked with ENOENT", code, rep)
		}
	})
	t.Run("chmod", func(t *testing.T) {
		p := seed(t, "x")
		wantEscaped(t, nil, "chmod", p, "600")
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("mode %v %v", st.Mode(), err)
		}
	})
	t.Run("utimes", func(t *testing.T) {
		p := seed(t, "x")
		wantEscaped(t, nil, "utimes", p)
		if st, err := os.Stat(p); err != nil || st.ModTime().Unix() != utimesStamp {
			t.Fatalf("mtime %v %v", st.ModTime(), err)
		}
	})
	t.Run("rename-out", func(t *testing.T) {
		src := seed(t, "x")
		dst := filepath.Join(t.TempDir(), "moved")
		wantEscaped(t, nil, "rename-out", src, dst)
		if read(t, dst) != "x" {
			t.Fatal("destination content")
		}
	})
	t.Run("link-out", func(t *testing.T) {
		src := seed(t, "x")
		dst := filepath.Join(filepath.Dir(src), "linked")
		wantEscaped(t, nil, "link-out", src, dst)
		if read(t, dst) != "x" {
			t.Fatal("link content")
		}
	})
	t.Run("symlink-write", func(t *testing.T) {
		link := filepath.Join(t.TempDir(), "l")
		target := seed(t, "x")
		wantEscaped(t, nil, "symlink-write", link, target)
		if got := read(t, target); got != marker {
			t.Fatalf("target content %q", got)
		}
	})
	t.Run("mknod-fifo", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "fifo")
		wantEscaped(t, nil, "mknod-fifo", p)
		if st, err := os.Lstat(p); err != nil || st.Mode()&os.ModeNamedPipe == 0 {
			t.Fatalf("fifo %v %v", st, err)
		}
	})
}

func TestProcessEscapesUnconfined(t *testing.T) {
	t.Run("kill", func(t *testing.T) {
		sleep, err := exec.LookPath("sleep")
		if err != nil {
			t.Skip(err)
		}
		cmd := exec.Command(sleep, "60")
		if err := cmd.Start(); err != nil {
			t.Skip(err)
		}
		wantEscaped(t, nil, "kill", strconv.Itoa(cmd.Process.Pid))
		_ = cmd.Wait()
		ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
			t.Fatalf("child ended with %v, want SIGUSR1", cmd.ProcessState)
		}
	})
	t.Run("env-dump-canary", func(t *testing.T) {
		t.Setenv("CONFINE_PROBE_CANARY", "canary-7f3a")
		rep := wantEscaped(t, nil, "env-dump", "canary-7f3a")
		if !strings.Contains(rep.Detail, "CONFINE_PROBE_CANARY=canary-7f3a") {
			t.Fatalf("detail %q", rep.Detail)
		}
		rep, code := runProbe(t, nil, "env-dump", "absent-canary-91c2")
		if code != exitBlocked {
			t.Fatalf("absent canary: got %d %+v", code, rep)
		}
	})
	t.Run("memory-bomb-isolated", func(t *testing.T) {
		rep := wantEscaped(t, nil, "memory-bomb", "8")
		if !strings.Contains(rep.Detail, "8 MiB") {
			t.Fatalf("detail %q", rep.Detail)
		}
	})
	t.Run("fork-bomb-small", func(t *testing.T) {
		rep := wantEscaped(t, nil, "fork-bomb", "3")
		if !strings.Contains(rep.Detail, "started 3 processes") {
			t.Fatalf("detail %q", rep.Detail)
		}
	})
	t.Run("setsid-daemon", func(t *testing.T) {
		markerPath := filepath.Join(t.TempDir(), "marker")
		wantEscaped(t, nil, "setsid-daemon", markerPath)
		b, err := os.ReadFile(markerPath)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		sid, err := unix.Getsid(pid)
		if err != nil {
			t.Fatalf("daemon %d: %v", pid, err)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if sid == getsid(t) {
			t.Fatalf("daemon is in the test's session %d", sid)
		}
	})
}

func getsid(t *testing.T) int {
	sid, err := unix.Getsid(0)
	if err != nil {
		t.Fatal(err)
	}
	return sid
}
