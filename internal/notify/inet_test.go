//go:build linux && (amd64 || arm64)

package notify

import (
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// envInet makes the harness filter send socket() to the supervisor.
const envInet = "NOTIFY_TEST_INET"

// probeInet: socket(Family, SockType, Flags as protocol), then Bind
// (to 127.0.0.1:0), Alt "listen", or connect to Sock ("ip:port") and read
// one byte.
func probeInet(op probeOp) probeResult {
	domain := unix.AF_INET
	if op.Family == "inet6" {
		domain = unix.AF_INET6
	}
	typ := unix.SOCK_STREAM
	switch op.SockType {
	case "dgram":
		typ = unix.SOCK_DGRAM
	case "raw":
		typ = unix.SOCK_RAW
	}
	if op.Nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	typ |= unix.SOCK_CLOEXEC
	s, err := unix.Socket(domain, typ, op.Flags)
	if err != nil {
		e := err.(unix.Errno)
		return probeResult{Errno: int(e), Err: "socket: " + errName(e)}
	}
	defer unix.Close(s)
	switch {
	case op.Bind:
		var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}
		if domain == unix.AF_INET6 {
			sa = &unix.SockaddrInet6{Addr: netip.IPv6Loopback().As16()}
		}
		e := inetErrno(unix.Bind(s, sa))
		return probeResult{Errno: int(e), Err: "bind: " + errName(e)}
	case op.Alt == "listen":
		e := inetErrno(unix.Listen(s, 1))
		return probeResult{Errno: int(e), Err: "listen: " + errName(e)}
	}
	ap := netip.MustParseAddrPort(op.Sock)
	var sa unix.Sockaddr = &unix.SockaddrInet6{Addr: ap.Addr().As16(), Port: int(ap.Port())}
	if domain == unix.AF_INET {
		sa = &unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())}
	}
	e := inetErrno(unix.Connect(s, sa))
	if e == unix.EINPROGRESS {
		fds := []unix.PollFd{{Fd: int32(s), Events: unix.POLLOUT}}
		_, _ = unix.Poll(fds, 5000)
		v, _ := unix.GetsockoptInt(s, unix.SOL_SOCKET, unix.SO_ERROR)
		e = unix.Errno(v)
	}
	r := probeResult{Errno: int(e), Err: errName(e)}
	if e == 0 {
		r.FDState = fdState(s)
		fds := []unix.PollFd{{Fd: int32(s), Events: unix.POLLIN}}
		_, _ = unix.Poll(fds, 5000)
		var b [1]byte
		if n, _ := unix.Read(s, b[:]); n == 1 {
			r.Byte = string(b[:])
		}
	}
	return r
}

func inetErrno(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if e, ok := err.(unix.Errno); ok {
		return e
	}
	return unix.EIO
}

// tcpServer accepts on loopback, writes "x" to each client and counts
// them.
type tcpServer struct {
	ln    net.Listener
	mu    sync.Mutex
	peers []string
}

func newTCPServer(t *testing.T) *tcpServer {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &tcpServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.peers = append(s.peers, c.RemoteAddr().String())
			s.mu.Unlock()
			c.Write([]byte("x"))
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return s
}

func (s *tcpServer) addr() netip.AddrPort { return netip.MustParseAddrPort(s.ln.Addr().String()) }

func (s *tcpServer) accepted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.peers...)
}

// TestEgress: with an Egress, the task reaches the proxy and nothing
// else; every other internet operation fails. The unconfined control
// shows the same probe reaches the other server.
func TestEgress(t *testing.T) {
	needRoot(t)
	t.Setenv(envInet, "1")
	for _, uid := range []int{0, 65534} {
		t.Run("uid"+strconv.Itoa(uid), func(t *testing.T) {
			fx := newFixture(t, uid)
			proxy, other := newTCPServer(t), newTCPServer(t)
			var mu sync.Mutex
			registered := map[netip.AddrPort]int{}
			var refused []netip.AddrPort
			cfg := fx.config(&Stats{})
			cfg.Egress = &Egress{Proxy: proxy.addr(),
				Register: func(l netip.AddrPort, tid int) { mu.Lock(); registered[l] = tid; mu.Unlock() },
				Refused:  func(d netip.AddrPort, tid int) { mu.Lock(); refused = append(refused, d); mu.Unlock() },
			}
			mapped := "[::ffff:127.0.0.1]:" + strconv.Itoa(int(proxy.addr().Port()))
			ops := []probeOp{
				{Name: "proxy", Call: "inet", Sock: proxy.addr().String()},
				{Name: "proxy-nonblock", Call: "inet", Sock: proxy.addr().String(), Nonblock: true},
				{Name: "proxy-v6-mapped", Call: "inet", Family: "inet6", Sock: mapped},
				{Name: "proxy-ipproto-tcp", Call: "inet", Sock: proxy.addr().String(), Flags: unix.IPPROTO_TCP},
				{Name: "other", Call: "inet", Sock: other.addr().String()},
				{Name: "other-v6", Call: "inet", Family: "inet6", Sock: "[::1]:" + strconv.Itoa(int(other.addr().Port()))},
				{Name: "udp", Call: "inet", SockType: "dgram", Sock: other.addr().String()},
				{Name: "raw", Call: "inet", SockType: "raw", Flags: unix.IPPROTO_ICMP, Sock: other.addr().String()},
				{Name: "mptcp", Call: "inet", Flags: 262, Sock: other.addr().String()},
				{Name: "bind", Call: "inet", Bind: true},
				{Name: "listen", Call: "inet", Alt: "listen"},
			}
			want := map[string]string{
				"proxy": "OK", "proxy-nonblock": "OK", "proxy-v6-mapped": "OK", "proxy-ipproto-tcp": "OK",
				"other": "ECONNREFUSED", "other-v6": "ECONNREFUSED",
				"udp": "EACCES", "raw": "EACCES", "mptcp": "EPROTONOSUPPORT",
				"bind": "EINVAL", "listen": "EINVAL",
			}
			res := runProbe(t, fx, ops, runOpts{confined: true, cfg: cfg})
			for _, r := range res {
				got := r.Err
				if i := strings.Index(got, ": "); i >= 0 {
					got = got[i+2:]
				}
				if got != want[r.Name] {
					t.Errorf("%s: %s, want %s", r.Name, r.Err, want[r.Name])
				}
				if want[r.Name] == "OK" && r.Byte != "x" {
					t.Errorf("%s: connected but read %q from the proxy", r.Name, r.Byte)
				}
				if r.Name == "proxy-nonblock" && !strings.Contains(r.FDState, "nonblock") {
					t.Errorf("%s: descriptor state %q, want nonblock kept", r.Name, r.FDState)
				}
			}
			if n := len(other.accepted()); n != 0 {
				t.Errorf("the other server accepted %d connections from the confined probe", n)
			}
			mu.Lock()
			for _, p := range proxy.accepted() {
				if _, ok := registered[netip.MustParseAddrPort(p)]; !ok {
					t.Errorf("proxy client %s was not registered before it connected (registered %v)", p, registered)
				}
			}
			if len(refused) != 2 {
				t.Errorf("refused destinations %v, want the two attempts on the other server", refused)
			}
			mu.Unlock()

			// The control: unconfined, the probe reaches the other server.
			res = runProbe(t, fx, []probeOp{{Name: "other", Call: "inet", Sock: other.addr().String()}}, runOpts{})
			if res[0].Err != "OK" || len(other.accepted()) != 1 {
				t.Fatalf("control: %+v, accepted %v", res[0], other.accepted())
			}
		})
	}
}

// TestEgressWithout: a supervisor without an Egress refuses internet
// sockets it is sent (a filter that sends them is misconfigured).
func TestEgressWithout(t *testing.T) {
	needRoot(t)
	t.Setenv(envInet, "1")
	fx := newFixture(t, 0)
	res := runProbe(t, fx, []probeOp{{Name: "socket", Call: "inet", Sock: "127.0.0.1:1"}}, runOpts{confined: true, cfg: fx.config(nil)})
	if res[0].Err != "socket: EAFNOSUPPORT" {
		t.Fatalf("%+v", res[0])
	}
}
