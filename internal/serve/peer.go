//go:build linux

package serve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrConfinedPeer: the client is inside a confined run, or is the
// supervisor of one acting for its command; a confined command must never
// reach confine's own server (docs/control-plane.md).
var ErrConfinedPeer = errors.New("refused: the client is inside a confined run")

// procStatus is what a process's /proc/PID/status says of its
// confinement: both are marks a process can acquire but never lose.
type procStatus struct {
	noNewPrivs bool
	filters    int // seccomp filters attached
}

// readStatus parses NoNewPrivs and Seccomp_filters from a status file.
func readStatus(b []byte) (procStatus, error) {
	var st procStatus
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		switch k {
		case "NoNewPrivs":
			st.noNewPrivs, seen = v == "1", seen+1
		case "Seccomp_filters":
			n, err := strconv.Atoi(v)
			if err != nil {
				return st, fmt.Errorf("the Seccomp_filters line %q: %v", v, err)
			}
			st.filters, seen = n, seen+1
		}
	}
	if seen != 2 {
		return st, errors.New("no NoNewPrivs or Seccomp_filters line (kernel older than 5.9?)")
	}
	return st, nil
}

// ownStatus is the server's own: a peer is judged relative to it (inside
// Docker the server itself already has a filter).
var ownStatus = sync.OnceValues(func() (procStatus, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return procStatus{}, err
	}
	return readStatus(b)
})

// peerRules are the checks of a peer process, in order; each returns why
// the peer is inside a run (or acts for one), "" when it is not.
var peerRules = []struct {
	name  string
	check func(pid int, own procStatus) (string, error)
}{
	{"confined", confinedWhy},
	{"supervisor", supervisorWhy},
}

// confinedWhy: every confined command has no_new_privs and confine's
// filter on top of whatever the server itself runs under.
func confinedWhy(pid int, own procStatus) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "", err
	}
	st, err := readStatus(b)
	if err != nil {
		return "", err
	}
	return judge(st, own), nil
}

// judge says why a process of status st is inside a run, as seen from
// own, or "".
func judge(st, own procStatus) string {
	if st.noNewPrivs && st.filters > own.filters {
		return fmt.Sprintf("it has no_new_privs and %d seccomp filters (this process has %d)", st.filters, own.filters)
	}
	return ""
}

// supervisorWhy: the seccomp supervisor connects unix sockets on its
// command's behalf (internal/notify), so the peer is then the
// supervisor, which holds the run's listener.
func supervisorWhy(pid int, _ procStatus) (string, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd"
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	for _, e := range ents {
		if l, err := os.Readlink(dir + "/" + e.Name()); err == nil && l == "anon_inode:seccomp notify" {
			return "it holds a seccomp listener: it supervises a confined run and may be connecting for its command", nil
		}
	}
	return "", nil
}

// checkPeer refuses, wrapping ErrConfinedPeer, a peer that is inside a
// confined run or supervises one, and a peer it cannot verify. credPID is
// SO_PEERCRED's pid; where the kernel has SO_PEERPIDFD (6.5) the peer is
// held by a pidfd, so that a pid reused meanwhile is noticed.
func checkPeer(c *net.UnixConn, credPID int) error {
	own, err := ownStatus()
	if err != nil {
		return fmt.Errorf("%w: cannot read this server's own status: %v", ErrConfinedPeer, err)
	}
	pidfd := peerPidfd(c)
	if pidfd >= 0 {
		defer unix.Close(pidfd)
	}
	if credPID <= 0 {
		return fmt.Errorf("%w: the client's pid is not visible here (another PID namespace), so it cannot be verified", ErrConfinedPeer)
	}
	for _, r := range peerRules {
		why, err := r.check(credPID, own)
		if err != nil && errors.Is(err, fs.ErrPermission) && privilegedPeer(c, credPID) {
			// A root process seen by an unprivileged listener (confine
			// mcp takes any uid's token): its descriptors are closed to
			// us, and a command never connects with root's
			// credentials and capabilities to another uid's 0600
			// socket; the confined rule above still applied.
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: cannot verify client pid %d (%s check): %v", ErrConfinedPeer, credPID, r.name, err)
		}
		if why != "" {
			return fmt.Errorf("%w: client pid %d: %s", ErrConfinedPeer, credPID, why)
		}
	}
	if pidfd >= 0 {
		// The process read above is the peer only if it still lives.
		// EPERM (a process we may not signal) is alive too.
		if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("%w: client pid %d exited while it was checked: %v", ErrConfinedPeer, credPID, err)
		}
	}
	return nil
}

// peerPidfd returns a pidfd of c's peer (SO_PEERPIDFD), or -1 where the
// kernel has none.
func peerPidfd(c *net.UnixConn) int {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1
	}
	fd := -1
	_ = rc.Control(func(s uintptr) {
		if v, err := unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			fd = v
		}
	})
	return fd
}

// maxAncestors bounds the walk up from a listener to its supervisor.
const maxAncestors = 64

// listenerInRun says why the process pid, a server's listener as the
// client sees it, is a command inside a confined run, or "": it is
// confined (no_new_privs and more filters than this process) and one of
// its ancestors supervises a run (holds a seccomp listener). The second
// half keeps a server inside a container started with no-new-privileges,
// seen from a client outside it, from passing for one. What cannot be
// read (another uid's ancestors) proves nothing: this check is the
// client's second lock, the launcher's refusal of socket directories
// inside writable roots the first.
func listenerInRun(pid int) string {
	own, err := ownStatus()
	if err != nil || pid <= 0 {
		return ""
	}
	why, err := confinedWhy(pid, own)
	if err != nil || why == "" {
		return ""
	}
	for p, i := pid, 0; p > 1 && i < maxAncestors; i++ {
		if p = parentOf(p); p <= 0 {
			return ""
		}
		if sup, err := supervisorWhy(p, own); err == nil && sup != "" {
			return fmt.Sprintf("%s, and its ancestor pid %d supervises a run", why, p)
		}
	}
	return ""
}

// parentOf is the PPid of /proc/PID/status, or -1.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "PPid:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return -1
			}
			return n
		}
	}
	return -1
}

// CheckPeer refuses, wrapping ErrConfinedPeer, a client of c that is
// inside a confined run or supervises one (the rules of confine serve),
// for confine's other listeners (confine mcp --listen).
func CheckPeer(c *net.UnixConn) error {
	_, pid, err := peerUID(c)
	if err != nil {
		return fmt.Errorf("%w: its credentials: %v", ErrConfinedPeer, err)
	}
	return checkPeer(c, pid)
}

// PeerCheckedListener is a unix listener whose Accept closes, and reports
// to Refused, every client CheckPeer refuses.
type PeerCheckedListener struct {
	*net.UnixListener
	Refused func(error)
}

// Accept returns the next client CheckPeer lets through.
func (l PeerCheckedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		if err := CheckPeer(c); err != nil {
			c.Close()
			if l.Refused != nil {
				l.Refused(err)
			}
			continue
		}
		return c, nil
	}
}

// privilegedPeer reports whether c's client is a root process seen by a
// listener that is not: root's credentials on the connection and a real
// uid of 0 in its status (a supervisor connecting for a command lends the
// command's credentials, which then differ from its own).
func privilegedPeer(c *net.UnixConn, pid int) bool {
	uid, _, err := peerUID(c)
	if err != nil || uid != 0 || os.Geteuid() == 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Uid:"); ok {
			f := strings.Fields(v)
			return len(f) > 0 && f[0] == "0"
		}
	}
	return false
}
