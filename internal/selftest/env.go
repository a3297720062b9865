//go:build linux

package selftest

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/fixture"
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

// gitDir makes the work directory a git work tree (a .git with a
// configuration and a hooks directory) and returns its .git.
func gitDir(e *Env) (string, error) {
	git := filepath.Join(e.Workdir, ".git")
	if _, err := file(git, "config", 0o644); err != nil {
		return "", err
	}
	if _, err := file(git, "hooks/pre-commit.sample", 0o755); err != nil {
		return "", err
	}
	return git, nil
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
func contentChanged(path string) fixture.Effect { return fixture.ContentChanged(path, original) }

// await is the effect "the listener got something", polled for the
// phase's settle time.
func (e *Env) await(r *fixture.Recorder) fixture.Effect { return r.Await(e.settle()) }

// tcp listens on addr of network (loopback only) and returns the port.
func (e *Env) tcp(network, addr string) (string, *fixture.Recorder, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return "", nil, err
	}
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), fixture.StreamListener(ln, e.onCleanup), nil
}

// unixListener makes a pathname (or, with "@name", abstract) stream socket.
func (e *Env) unixListener(path string) (*fixture.Recorder, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return fixture.StreamListener(ln, e.onCleanup), nil
}

// startVictim starts sleep(1) with the canary in its environment.
func (e *Env) startVictim(canary string) (*fixture.Victim, error) {
	v, err := fixture.StartSleep([]string{victimPATH, canary}, -1, false, e.onCleanup)
	if u := (*fixture.Unavailable)(nil); errors.As(err, &u) {
		return nil, errNA{u.Reason}
	}
	return v, err
}

// victimPATH is the victim's PATH, and that of the cat(1) that may read
// its maps.
const victimPATH = "PATH=/usr/bin:/bin"

// openPTY opens a pseudo-terminal to play the caller's terminal (stdin
// and controlling terminal of the launched process).
func (e *Env) openPTY() (*fixture.PTY, error) {
	p, err := fixture.OpenPTY(-1, e.onCleanup)
	if u := (*fixture.Unavailable)(nil); errors.As(err, &u) {
		return nil, errNA{"no pseudo-terminal to play the caller's terminal: " + u.Reason}
	}
	return p, err
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

// errNA is a fixture that cannot be set up because the host lacks what the
// vector needs: the vector is not applicable, with this reason.
type errNA struct{ reason string }

func (e errNA) Error() string { return e.reason }
