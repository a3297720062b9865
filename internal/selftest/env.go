//go:build linux

package selftest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// original is the content of every fixture file an attack tries to change.
const original = "confine selftest fixture\n"

// Settle times: how long an asynchronous effect (a connection reaching a
// listener, a victim dying) may take to show. A control's effect must
// surely arrive; after a confined run the attempt is already over.
const (
	controlSettle  = 5 * time.Second
	confinedSettle = 300 * time.Millisecond
)

// Env is one phase (control or confined) of one vector: a fresh work
// directory, a lazily made "outside" directory, and the cleanups of what
// the fixture started.
type Env struct {
	// Confined says this is the phase run under `confine run`.
	Confined bool
	// Workdir is the run's work directory (the control's cwd).
	Workdir string
	// Probe is the path of the confine binary the probe runs from.
	Probe string

	base     string
	out      string
	cleanups []func()
}

func newEnv(base, probe string, confined bool) (*Env, error) {
	e := &Env{Confined: confined, Probe: probe, base: base}
	wd, err := e.freshDir("wd-")
	if err != nil {
		return nil, err
	}
	e.Workdir = wd
	return e, nil
}

// cleanup runs the registered cleanups, last first.
func (e *Env) cleanup() {
	for i := len(e.cleanups) - 1; i >= 0; i-- {
		e.cleanups[i]()
	}
	e.cleanups = nil
}

func (e *Env) onCleanup(f func()) { e.cleanups = append(e.cleanups, f) }

// settle is this phase's settle time.
func (e *Env) settle() time.Duration {
	if e.Confined {
		return confinedSettle
	}
	return controlSettle
}

// freshDir makes a new 0755 directory in the selftest's scratch directory;
// nothing grants it to a confined run unless the fixture says so.
func (e *Env) freshDir(prefix string) (string, error) {
	d, err := os.MkdirTemp(e.base, prefix)
	if err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		return "", fmt.Errorf("scratch directory: %w", err)
	}
	e.onCleanup(func() { _ = os.RemoveAll(d) })
	return d, nil
}

// outside is this phase's directory outside every root of the run.
func (e *Env) outside() (string, error) {
	if e.out == "" {
		d, err := e.freshDir("out-")
		if err != nil {
			return "", err
		}
		e.out = d
	}
	return e.out, nil
}

// file writes original into dir/name (making the directories on the way)
// with mode and returns its path.
func file(dir, name string, mode os.FileMode) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("fixture file: %w", err)
	}
	if err := os.WriteFile(p, []byte(original), mode); err != nil {
		return "", fmt.Errorf("fixture file: %w", err)
	}
	if err := os.Chmod(p, mode); err != nil {
		return "", fmt.Errorf("fixture file: %w", err)
	}
	return p, nil
}

// outsideFile is a fresh file in the outside directory.
func (e *Env) outsideFile(name string) (string, error) {
	d, err := e.outside()
	if err != nil {
		return "", err
	}
	return file(d, name, 0o644)
}

// contentChanged is the effect "the file no longer holds original".
func contentChanged(path string) func() (bool, string) {
	return func() (bool, string) {
		b, err := os.ReadFile(path)
		if err != nil {
			return true, fmt.Sprintf("%s is gone or unreadable: %v", path, err)
		}
		if string(b) != original {
			return true, fmt.Sprintf("%s now holds %q", path, oneLine(string(b), 60))
		}
		return false, path + " unchanged"
	}
}

// exists is the effect "path was created".
func exists(path string) func() (bool, string) {
	return func() (bool, string) {
		var st unix.Stat_t
		if err := unix.Lstat(path, &st); err != nil {
			return false, path + " does not exist"
		}
		return true, fmt.Sprintf("%s exists (mode %#o)", path, st.Mode)
	}
}

// recorder collects what a listener of the selftest received.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, a ...any) {
	r.mu.Lock()
	r.events = append(r.events, fmt.Sprintf(format, a...))
	r.mu.Unlock()
}

func (r *recorder) seen() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.events) == 0 {
		return false, "the listener received nothing"
	}
	return true, strings.Join(r.events, "; ")
}

// await is the effect "the listener got something", polled for the
// phase's settle time.
func (e *Env) await(r *recorder) func() (bool, string) {
	return func() (bool, string) {
		waitFor(e.settle(), func() bool { ok, _ := r.seen(); return ok })
		return r.seen()
	}
}

// streamListener accepts on ln and records every connection.
func (e *Env) streamListener(ln net.Listener) *recorder {
	r := &recorder{}
	e.onCleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				buf := make([]byte, 16)
				n, _ := c.Read(buf)
				r.add("accepted a connection on %s, read %d byte(s)", ln.Addr(), n)
			}(c)
		}
	}()
	return r
}

func (e *Env) packetListener(pc net.PacketConn) *recorder {
	r := &recorder{}
	e.onCleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 64)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			r.add("received a %d-byte datagram on %s", n, pc.LocalAddr())
		}
	}()
	return r
}

// tcp listens on addr of network (loopback only) and returns the port.
func (e *Env) tcp(network, addr string) (string, *recorder, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return "", nil, err
	}
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), e.streamListener(ln), nil
}

// unixListener makes a pathname (or, with "@name", abstract) stream socket.
func (e *Env) unixListener(path string) (*recorder, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return e.streamListener(ln), nil
}

// victim is a process the selftest started, for the process vectors. It
// is only ever signalled through its os.Process (a pidfd: safe from pid
// reuse).
type victim struct {
	pid   int
	done  chan struct{}
	state *os.ProcessState
}

// startVictim starts sleep(1) with the canary in its environment.
func (e *Env) startVictim(canary string) (*victim, error) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return nil, errNA{fmt.Sprintf("no sleep(1) to be the victim process: %v", err)}
	}
	cmd := exec.Command(sleep, "300")
	cmd.Env = []string{"PATH=/usr/bin:/bin", canary}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the victim %s: %w", sleep, err)
	}
	v := &victim{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		v.state = cmd.ProcessState
		close(v.done)
	}()
	e.onCleanup(func() {
		select {
		case <-v.done:
		default:
			_ = cmd.Process.Kill() // our own child, by pidfd
			<-v.done
		}
	})
	return v, nil
}

// ended is the effect "the victim was terminated".
func (v *victim) ended(d time.Duration) func() (bool, string) {
	return func() (bool, string) {
		select {
		case <-v.done:
			return true, fmt.Sprintf("victim pid %d ended: %v", v.pid, v.state)
		case <-time.After(d):
			return false, fmt.Sprintf("victim pid %d still running", v.pid)
		}
	}
}

// check says the victim is alive, not stopped and untraced.
func (v *victim) check() error {
	select {
	case <-v.done:
		return fmt.Errorf("victim pid %d ended: %v", v.pid, v.state)
	default:
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", v.pid))
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, val, _ := strings.Cut(line, ":")
		val = strings.TrimSpace(val)
		switch k {
		case "State":
			if strings.HasPrefix(val, "T") || strings.HasPrefix(val, "t") || strings.HasPrefix(val, "Z") {
				return fmt.Errorf("victim pid %d is in state %s", v.pid, val)
			}
		case "TracerPid":
			if val != "0" {
				return fmt.Errorf("victim pid %d is traced by %s", v.pid, val)
			}
		}
	}
	return nil
}

// firstMapping is the start address of the victim's first mapping.
func (v *victim) firstMapping() (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", v.pid))
	if err != nil {
		return "", fmt.Errorf("victim's maps: %w", err)
	}
	start, _, ok := strings.Cut(string(b), "-")
	if !ok {
		return "", fmt.Errorf("no mapping in /proc/%d/maps", v.pid)
	}
	return start, nil
}

// pty is a pseudo-terminal the selftest opened: the master stays here, the
// slave plays the caller's terminal (stdin and controlling terminal of the
// launched process).
type pty struct {
	master int
	slave  *os.File
	path   string
}

// openPTY opens /dev/ptmx, unlocks the slave and opens it. Echo stays on:
// a byte injected into the slave's input queue is echoed to the master.
func (e *Env) openPTY() (*pty, error) {
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, errNA{fmt.Sprintf("no pseudo-terminal to play the caller's terminal: open /dev/ptmx: %v", err)}
	}
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		unix.Close(m)
		return nil, fmt.Errorf("unlockpt: %w", err)
	}
	n, err := unix.IoctlGetUint32(m, unix.TIOCGPTN)
	if err != nil {
		unix.Close(m)
		return nil, fmt.Errorf("ptsname: %w", err)
	}
	path := fmt.Sprintf("/dev/pts/%d", n)
	s, err := unix.Open(path, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(m)
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	p := &pty{master: m, slave: os.NewFile(uintptr(s), path), path: path}
	e.onCleanup(func() {
		p.slave.Close()
		unix.Close(p.master)
	})
	return p, nil
}

// injected is the effect "something was pushed into the terminal's input"
// (seen as its echo on the master).
func (e *Env) injected(p *pty) func() (bool, string) {
	var got []byte
	return func() (bool, string) {
		waitFor(e.settle(), func() bool {
			buf := make([]byte, 256)
			for {
				n, err := unix.Read(p.master, buf)
				if n <= 0 || err != nil {
					break
				}
				got = append(got, buf[:n]...)
			}
			return bytes.Contains(got, []byte("x"))
		})
		if bytes.Contains(got, []byte("x")) {
			return true, fmt.Sprintf("the terminal %s echoed injected input %q", p.path, got)
		}
		return false, fmt.Sprintf("nothing injected into %s", p.path)
	}
}

// processesWith lists the live processes (not zombies) whose command line
// holds arg; they are this user's run's leftovers (the daemon vector).
func processesWith(arg string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	want := []byte("\x00" + arg + "\x00")
	var pids []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile("/proc/" + ent.Name() + "/cmdline")
		if err != nil || !bytes.Contains(append([]byte{0}, b...), want) {
			continue
		}
		if st, err := os.ReadFile("/proc/" + ent.Name() + "/stat"); err == nil {
			if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && st[i+2] == 'Z' {
				continue
			}
		}
		pids = append(pids, pid)
	}
	return pids
}

// killProcessesWith SIGKILLs the processes whose command line holds arg,
// each through a pidfd opened before its command line is checked again, so
// a reused pid is never signalled.
func killProcessesWith(arg string) {
	for _, pid := range processesWith(arg) {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err == nil && bytes.Contains(append([]byte{0}, b...), []byte("\x00"+arg+"\x00")) {
			_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		}
		unix.Close(fd)
	}
}

// waitFor polls cond until it holds or limit has passed.
func waitFor(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// randName is prefix with 12 random hex digits.
func randName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		s = s[:n] + "..."
	}
	return s
}

// errNA is a fixture that cannot be set up because the host lacks what the
// vector needs: the vector is not applicable, with this reason.
type errNA struct{ reason string }

func (e errNA) Error() string { return e.reason }
