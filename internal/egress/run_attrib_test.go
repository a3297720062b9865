//go:build linux

package egress

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"syscall"
	"testing"
)

// TestEgressAttribution: the proxy attributes a client to the command
// only when it comes from the very address (IP and port) the supervisor
// registered. A host process that takes the registered port on another
// loopback address connects to the proxy (the attack happens) and is not
// attributed; it cannot take the registered address itself while the
// supervisor's socket holds it; the supervisor's own connection is
// attributed, once.
func TestEgressAttribution(t *testing.T) {
	proxy, err := net.ListenTCP("tcp4", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	e := &Run{pids: map[netip.AddrPort]int{}}
	// The supervisor's socket: bound to the proxy's address, port from
	// the kernel, registered before it connects (internal/notify).
	sup, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(sup)
	if err := syscall.Bind(sup, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(sup)
	if err != nil {
		t.Fatal(err)
	}
	port := sa.(*syscall.SockaddrInet4).Port
	const tid = 4321
	e.Register(netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), uint16(port)), tid)

	accept := func() net.Addr {
		t.Helper()
		c, err := proxy.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		return c.RemoteAddr()
	}
	// The host process on 127.0.0.2, same port.
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: port}}
	other, err := d.DialContext(context.Background(), "tcp4", proxy.Addr().String())
	if err != nil {
		t.Fatalf("the host process's connect from 127.0.0.2:%d (the attack) failed: %v", port, err)
	}
	defer other.Close()
	if got := accept(); e.pidOf(got) != 0 {
		t.Fatalf("a connection from %v was attributed to the command", got)
	}
	// The registered address itself is taken.
	d = net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}}
	if c, err := d.DialContext(context.Background(), "tcp4", proxy.Addr().String()); err == nil {
		c.Close()
		t.Fatalf("a host process connected from the supervisor's bound address 127.0.0.1:%d", port)
	} else if !errors.Is(err, syscall.EADDRINUSE) {
		t.Logf("binding the supervisor's address: %v", err)
	}
	// The supervisor's connection: attributed, and only once.
	pa := proxy.Addr().(*net.TCPAddr)
	if err := syscall.Connect(sup, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: pa.Port}); err != nil {
		t.Fatal(err)
	}
	got := accept()
	if pid := e.pidOf(got); pid != tid {
		t.Fatalf("the supervisor's connection from %v: pid %d, want %d", got, pid, tid)
	}
	if pid := e.pidOf(got); pid != 0 {
		t.Fatalf("a registration served twice (pid %d)", pid)
	}
}
