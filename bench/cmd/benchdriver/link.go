//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The link rows' addresses: 198.18.0.0/15 is set aside for benchmarks
// (RFC 2544), and both ends live only in namespaces the bench made.
const (
	linkClient = "198.18.0.1"
	linkServer = "198.18.0.2"
)

// link is a veth pair between two network namespaces the bench made.
type link struct {
	cli, srv       string // namespace names
	cliDev, srvDev string
}

// ipCmd runs ip or tc with args and returns its error with its output.
func ipCmd(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// newLink makes namespaces confine-bench-{cli,srv}-ID joined by a veth
// pair made inside them (it goes away with them), addresses and loopback
// up. On failure it removes what it made.
func newLink(id int) (*link, error) {
	sweepLinks()
	s := strconv.Itoa(id)
	l := &link{cli: "confine-bench-cli-" + s, srv: "confine-bench-srv-" + s, cliDev: "cbc" + s, srvDev: "cbs" + s}
	steps := [][]string{
		{"ip", "netns", "add", l.cli},
		{"ip", "netns", "add", l.srv},
		{"ip", "link", "add", l.cliDev, "netns", l.cli, "type", "veth", "peer", "name", l.srvDev, "netns", l.srv},
		{"ip", "-n", l.cli, "addr", "add", linkClient + "/30", "dev", l.cliDev},
		{"ip", "-n", l.srv, "addr", "add", linkServer + "/30", "dev", l.srvDev},
		{"ip", "-n", l.cli, "link", "set", "lo", "up"},
		{"ip", "-n", l.srv, "link", "set", "lo", "up"},
		{"ip", "-n", l.cli, "link", "set", l.cliDev, "up"},
		{"ip", "-n", l.srv, "link", "set", l.srvDev, "up"},
	}
	for i, st := range steps {
		if err := ipCmd(st[0], st[1:]...); err != nil {
			if i > 0 {
				l.close()
			}
			return nil, err
		}
	}
	return l, nil
}

// sweepLinks deletes the namespaces an earlier bench left behind when it
// was killed before its deferred close: those named for a process that no
// longer exists. A number reused since by another process keeps its
// namespaces (left, never wrongly removed).
func sweepLinks() {
	ents, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), "confine-bench-cli-")
		if !ok {
			rest, ok = strings.CutPrefix(e.Name(), "confine-bench-srv-")
		}
		pid, err := strconv.Atoi(rest)
		if !ok || err != nil || pid <= 0 || unix.Kill(pid, 0) != unix.ESRCH {
			continue
		}
		if err := ipCmd("ip", "netns", "del", e.Name()); err != nil {
			fmt.Fprintf(os.Stderr, "bench: removing a namespace a killed bench left: %v\n", err)
		}
	}
}

// shape sets tbf at rate on both ends. The burst is 2 ms at the rate
// (at least 32 KiB), the queue 20 ms.
func (l *link) shape(rate string) error {
	bits, err := rateBits(rate)
	if err != nil {
		return err
	}
	burst := max(int(bits/8/500), 32<<10)
	for _, e := range [][2]string{{l.cli, l.cliDev}, {l.srv, l.srvDev}} {
		if err := ipCmd("tc", "-n", e[0], "qdisc", "replace", "dev", e[1], "root", "tbf",
			"rate", rate, "burst", strconv.Itoa(burst), "latency", "20ms"); err != nil {
			return err
		}
	}
	return nil
}

// listen listens on the server's address inside the server namespace:
// a thread of this process enters it, makes the socket (which stays in
// that namespace) and exits with it, never returning to the runtime's
// pool.
func (l *link) listen() (net.Listener, error) {
	type res struct {
		ln  net.Listener
		err error
	}
	ch := make(chan res, 1)
	go func() {
		// Not unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + l.srv)
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{err: fmt.Errorf("setns %s: %w", l.srv, err)}
			return
		}
		ln, err := net.Listen("tcp4", linkServer+":0")
		ch <- res{ln, err}
	}()
	r := <-ch
	return r.ln, r.err
}

// close deletes the namespaces by name (the veth pair goes with them).
func (l *link) close() {
	for _, ns := range []string{l.cli, l.srv} {
		if err := ipCmd("ip", "netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	}
}

// rateBits parses a tc rate ("1gbit", "200mbit", "500kbit") into bits/s.
func rateBits(rate string) (float64, error) {
	r := strings.ToLower(rate)
	for _, u := range []struct {
		suffix string
		m      float64
	}{{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}} {
		if v, err := strconv.ParseFloat(strings.TrimSuffix(r, u.suffix), 64); strings.HasSuffix(r, u.suffix) && err == nil && v > 0 {
			return v * u.m, nil
		}
	}
	return 0, errors.New("link rate " + strconv.Quote(rate) + ": want a tc rate such as 1gbit, 200mbit or 500kbit")
}
