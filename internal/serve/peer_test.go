//go:build linux

package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/spec"
)

func TestReadStatus(t *testing.T) {
	cases := []struct {
		name, text string
		want       procStatus
		err        bool
	}{
		{"plain", "Name:\tsh\nNoNewPrivs:\t0\nSeccomp:\t0\nSeccomp_filters:\t0\n", procStatus{}, false},
		{"confined", "NoNewPrivs:\t1\nSeccomp:\t2\nSeccomp_filters:\t2\n", procStatus{noNewPrivs: true, filters: 2}, false},
		{"no filter count", "NoNewPrivs:\t1\nSeccomp:\t2\n", procStatus{}, true},
		{"bad count", "NoNewPrivs:\t1\nSeccomp_filters:\tx\n", procStatus{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := readStatus([]byte(c.text))
			if (err != nil) != c.err {
				t.Fatalf("err = %v, want error %v", err, c.err)
			}
			if err == nil && got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	cases := []struct {
		name     string
		st, own  procStatus
		confined bool
	}{
		{"unconfined peer, plain server", procStatus{}, procStatus{}, false},
		{"confined peer, plain server", procStatus{true, 1}, procStatus{}, true},
		{"docker: peer as confined as the server", procStatus{true, 1}, procStatus{true, 1}, false},
		{"docker: run inside the server's container", procStatus{true, 2}, procStatus{true, 1}, true},
		{"filters without no_new_privs (privileged)", procStatus{false, 3}, procStatus{}, false},
		{"no_new_privs alone (systemd unit)", procStatus{true, 0}, procStatus{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := judge(c.st, c.own) != ""; got != c.confined {
				t.Errorf("judge(%+v, %+v) confined = %v, want %v", c.st, c.own, got, c.confined)
			}
		})
	}
}

// TestPeerRulesOnPlainProcess: a process outside any run passes every
// rule, and the rules read a real /proc (a rule that cannot read fails).
func TestPeerRulesOnPlainProcess(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start sleep: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	own, err := ownStatus()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range peerRules {
		why, err := r.check(cmd.Process.Pid, own)
		if err != nil || why != "" {
			t.Errorf("%s: why %q, err %v; want neither", r.name, why, err)
		}
		if _, err := r.check(1<<30, own); err == nil || !strings.Contains(err.Error(), "no such file") && !os.IsNotExist(err) {
			t.Errorf("%s on a missing pid: err %v, want not-exist", r.name, err)
		}
	}
}

// peerHelperEnv makes the test binary a client of the server at its
// value's socket, in the mode named by peerModeEnv, which prints the
// refusal's kind ("ok" when served).
const (
	peerHelperEnv = "CONFINE_SERVE_PEER_HELPER"
	peerModeEnv   = "CONFINE_SERVE_PEER_MODE"
)

func init() {
	if os.Getenv(peerHelperEnv) != "" {
		// The main goroutine keeps the thread group's leader, whose
		// /proc status the server reads.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if sock := os.Getenv(peerHelperEnv); sock != "" {
		os.Exit(peerHelper(sock, os.Getenv(peerModeEnv)))
	}
	os.Exit(m.Run())
}

// allowAll installs a seccomp filter that allows everything, with flags,
// on the calling thread (no_new_privs first, as a confined command has).
func allowAll(flags uintptr) (int, error) {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return -1, err
	}
	f := []unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	prog := unix.SockFprog{Len: 1, Filter: &f[0]}
	fd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, flags, uintptr(unsafe.Pointer(&prog)))
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func peerHelper(sock, mode string) int {
	switch mode {
	case "confined":
		// Every thread, the leader included: a confined command.
		if _, err := allowAll(unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
			fmt.Println("setup:", err)
			return 3
		}
	case "supervisor":
		// One side thread holds a listener; the leader stays plain, as
		// the launcher's does.
		ready := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with it
			_, err := allowAll(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
			ready <- err
			select {}
		}()
		if err := <-ready; err != nil {
			fmt.Println("setup:", err)
			return 3
		}
	}
	if mode == "supervisor-parent" {
		// A launcher: it holds a seccomp listener and starts the command
		// (confined-listener), whose output it passes on.
		ready := make(chan error)
		go func() {
			runtime.LockOSThread()
			_, err := allowAll(unix.SECCOMP_FILTER_FLAG_NEW_LISTENER)
			ready <- err
			select {}
		}()
		if err := <-ready; err != nil {
			fmt.Println("setup:", err)
			return 3
		}
		exe, _ := os.Executable()
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), peerModeEnv+"=confined-listener")
		cmd.Stdout = os.Stdout
		if err := cmd.Run(); err != nil {
			return 3
		}
		return 0
	}
	if mode == "confined-listener" {
		// A confined command that put its own socket where the server's
		// was: it accepts and never answers.
		if _, err := allowAll(unix.SECCOMP_FILTER_FLAG_TSYNC); err != nil {
			fmt.Println("setup:", err)
			return 3
		}
		ln, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Println("listen:", err)
			return 3
		}
		fmt.Println("listening")
		for {
			if _, err := ln.Accept(); err != nil {
				return 3
			}
		}
	}
	c, err := Dial(sock)
	if err != nil {
		fmt.Println("dial:", err)
		return 3
	}
	resp, err := Do(context.Background(), c, &Request{Spec: spec.CommandSpec{Program: "echo"}}, nil)
	switch {
	case err != nil:
		fmt.Println("do:", err)
		return 3
	case resp.Error != nil:
		fmt.Println(resp.Error.Kind)
	default:
		fmt.Println("ok")
	}
	return 0
}

// TestRefusesClientsInsideRuns: a client with no_new_privs and a filter
// more than the server, and a client holding a seccomp listener (the
// supervisor connecting for its command), are refused as "peer"; the same
// binary without either is served.
func TestRefusesClientsInsideRuns(t *testing.T) {
	s := start(t, newEcho(), nil)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ mode, want string }{{"plain", "ok"}, {"confined", "peer"}, {"supervisor", "peer"}} {
		t.Run(c.mode, func(t *testing.T) {
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), peerHelperEnv+"="+s.Socket, peerModeEnv+"="+c.mode)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("helper: %v: %s", err, out)
			}
			if got := strings.TrimSpace(string(out)); got != c.want {
				t.Errorf("client %s: got %q, want %q", c.mode, got, c.want)
			}
		})
	}
}

// TestDialRefusesConfinedListener: a socket served by a command inside a
// run (one that replaced the server's socket: confined, below a process
// holding a seccomp listener) is refused by the client before any request
// goes out; a confined listener no supervisor started (a server in a
// container with no-new-privileges, seen from outside) is not.
func TestDialRefusesConfinedListener(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode   string
		refuse bool
	}{{"supervisor-parent", true}, {"confined-listener", false}} {
		t.Run(c.mode, func(t *testing.T) {
			sock := filepath.Join(privDir(t), SocketName)
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), peerHelperEnv+"="+sock, peerModeEnv+"="+c.mode)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() }()
			line, _ := bufio.NewReader(out).ReadString('\n')
			if strings.TrimSpace(line) != "listening" {
				t.Fatalf("helper: %q", line)
			}
			conn, err := Dial(sock)
			if !c.refuse {
				if err != nil {
					t.Fatalf("Dial: %v, want a connection", err)
				}
				conn.Close()
				return
			}
			if err == nil {
				conn.Close()
				t.Fatal("Dial accepted a listener inside a confined run")
			}
			if !errors.Is(err, ErrPeer) || !strings.Contains(err.Error(), "inside a confined run") {
				t.Errorf("Dial: %v, want ErrPeer naming the run", err)
			}
		})
	}
}

// TestPeerCheckedListener: confine's other listeners (confine mcp
// --listen) refuse a client inside a run the same way: Accept never
// returns it, Refused hears why; a plain client is accepted.
func TestPeerCheckedListener(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mode   string
		refuse bool
	}{{"plain", false}, {"confined", true}, {"supervisor", true}} {
		t.Run(c.mode, func(t *testing.T) {
			sock := filepath.Join(privDir(t), SocketName)
			uln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			refused := make(chan error, 1)
			ln := PeerCheckedListener{UnixListener: uln, Refused: func(err error) { refused <- err }}
			accepted := make(chan net.Conn, 1)
			go func() {
				if conn, err := ln.Accept(); err == nil {
					accepted <- conn
				}
			}()
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), peerHelperEnv+"="+sock, peerModeEnv+"="+c.mode)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); uln.Close() }()
			select {
			case err := <-refused:
				if !c.refuse || !errors.Is(err, ErrConfinedPeer) {
					t.Errorf("refused (%v), want refused %v", err, c.refuse)
				}
			case conn := <-accepted:
				conn.Close()
				if c.refuse {
					t.Error("accepted a client inside a run")
				}
			}
		})
	}
}
