//go:build linux && (amd64 || arm64)

package notify

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fallbackCase is one connect() in TestConnectFallback: the errno and, on
// success, the descriptor state (fdState) expected unconfined, confined with
// pidfd_getfd, and confined without it.
type fallbackCase struct {
	op                       probeOp
	control, getfd, fallback unix.Errno
	state                    string // fdState after a successful connect, whatever the mode
}

func fallbackCases(abstract string) []fallbackCase {
	type P = probeOp
	const ok = unix.Errno(0)
	return []fallbackCase{
		{P{Name: "stream inside", Call: "connect", Sock: "$BASE/w/s.sock"}, ok, ok, ok, "cloexec,peer"},
		{P{Name: "stream inside relative", Call: "connect", Sock: "w/s.sock"}, ok, ok, ok, "cloexec,peer"},
		{P{Name: "stream nonblock", Call: "connect", Sock: "$BASE/w/s.sock", Nonblock: true}, ok, ok, ok, "nonblock,cloexec,peer"},
		{P{Name: "stream no cloexec", Call: "connect", Sock: "$BASE/w/s.sock", NoCloexec: true}, ok, ok, ok, "peer"},
		{P{Name: "stream allowlisted", Call: "connect", Sock: "$BASE/out/allowed.sock"}, ok, ok, ok, "cloexec,peer"},
		{P{Name: "stream outside", Call: "connect", Sock: "$BASE/out/s.sock"}, ok, unix.EACCES, unix.EACCES, "cloexec,peer"},
		{P{Name: "stream symlink to outside", Call: "connect", Sock: "$BASE/w/slnk"}, ok, unix.EACCES, unix.EACCES, "cloexec,peer"},
		{P{Name: "stream abstract", Call: "connect", Sock: "@" + abstract}, ok, unix.EPERM, unix.EPERM, "cloexec,peer"},
		{P{Name: "stream missing", Call: "connect", Sock: "$BASE/w/nope.sock"}, unix.ENOENT, unix.ENOENT, unix.ENOENT, ""},
		{P{Name: "inet socket", Call: "connect", Family: "inet"}, unix.ECONNREFUSED, unix.EAFNOSUPPORT, unix.EAFNOSUPPORT, ""},
		// The type is carried over: a datagram or seqpacket socket cannot
		// reach a stream listener, but does reach a datagram socket.
		{P{Name: "seqpacket to stream", Call: "connect", Sock: "$BASE/w/s.sock", SockType: "seqpacket"}, unix.EPROTOTYPE, unix.EPROTOTYPE, unix.EPROTOTYPE, ""},
		{P{Name: "dgram to stream", Call: "connect", Sock: "$BASE/w/s.sock", SockType: "dgram"}, unix.EPROTOTYPE, unix.EPROTOTYPE, unix.EPROTOTYPE, ""},
		{P{Name: "dgram inside", Call: "connect", Sock: "$BASE/w/d.sock", SockType: "dgram"}, ok, ok, ok, "cloexec,peer"},
		{P{Name: "dgram outside", Call: "connect", Sock: "$BASE/out/d.sock", SockType: "dgram"}, ok, unix.EACCES, unix.EACCES, "cloexec,peer"},
		{P{Name: "dgram dissolve", Call: "connect", Sock: "$BASE/w/d.sock", SockType: "dgram", Unspec: true}, ok, ok, ok, "cloexec"},
		// A bound socket would lose its address: refused without
		// pidfd_getfd.
		{P{Name: "stream bound", Call: "connect", Sock: "$BASE/w/s.sock", Bind: true}, ok, ok, unix.EOPNOTSUPP, "cloexec,peer"},
	}
}

// TestConnectFallback runs connects as the supervisor does them where
// pidfd_getfd is refused (Docker's default seccomp profile): it creates a
// socket of the task's type and installs it with SECCOMP_IOCTL_NOTIF_ADDFD.
// Each row runs unconfined (control), confined with pidfd_getfd, and
// confined without it, as root and as uid 65534.
func TestConnectFallback(t *testing.T) {
	needRoot(t)
	for _, uid := range []int{0, 65534} {
		t.Run(fmt.Sprintf("uid%d", uid), func(t *testing.T) {
			for _, mode := range []string{"control", "getfd", "fallback"} {
				fx := newFixture(t, uid)
				for _, name := range []string{"w/d.sock", "out/d.sock"} {
					p := filepath.Join(fx.base, name)
					c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: p, Net: "unixgram"})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { c.Close() })
					if err := os.Chown(p, uid, uid); err != nil {
						t.Fatal(err)
					}
				}
				cases := fallbackCases(fx.abstract)
				ops := make([]probeOp, len(cases))
				for i, c := range cases {
					ops[i] = c.op
				}
				stats := &Stats{}
				o := runOpts{confined: mode != "control", dropCaps: true, cfg: fx.config(stats)}
				forceNoGetfd.Store(mode == "fallback")
				res := runProbe(t, fx, ops, o)
				forceNoGetfd.Store(false)
				if len(res) != len(cases) {
					t.Fatalf("%s: %d results for %d cases", mode, len(res), len(cases))
				}
				for i, c := range cases {
					want := map[string]unix.Errno{"control": c.control, "getfd": c.getfd, "fallback": c.fallback}[mode]
					r := res[i]
					if got := unix.Errno(r.Errno); got != want {
						t.Errorf("%s %q: got %s, want %s (denials: %+v)", mode, c.op.Name, errName(got), errName(want), stats.Denials())
						continue
					}
					if want != 0 {
						continue
					}
					if r.FDState != c.state {
						t.Errorf("%s %q: descriptor state %q, want %q", mode, c.op.Name, r.FDState, c.state)
					}
					if strings.HasPrefix(c.op.Sock, "$BASE/w/s.sock") || strings.HasPrefix(c.op.Sock, "w/s.sock") ||
						strings.HasSuffix(c.op.Sock, "allowed.sock") {
						if r.Byte != "x" {
							t.Errorf("%s %q: no byte exchanged over the connection", mode, c.op.Name)
						}
					}
				}
				// The listeners outside saw nothing of the confined probe,
				// and the inside one saw the probe's own credentials.
				if mode != "control" {
					if n := len(fx.peers("out/s.sock")); n != 0 {
						t.Errorf("%s: outside listener got %d connections", mode, n)
					}
					if n := len(fx.peers("@" + fx.abstract)); n != 0 {
						t.Errorf("%s: abstract listener got %d connections", mode, n)
					}
					for _, p := range fx.peers("w/s.sock") {
						if int(p.Uid) != uid || int(p.Gid) != uid {
							t.Errorf("%s: inside listener saw peer uid=%d gid=%d, want %d", mode, p.Uid, p.Gid, uid)
						}
					}
				}
				if mode == "fallback" {
					found := false
					for _, d := range stats.Denials() {
						if d.Syscall == "connect" && d.Errno == unix.EOPNOTSUPP && strings.Contains(d.Reason, "bound") {
							found = true
						}
					}
					if !found {
						t.Errorf("fallback: no denial explains the bound socket; denials %+v", stats.Denials())
					}
				}
			}
		})
	}
}
