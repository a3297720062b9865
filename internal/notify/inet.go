//go:build linux

package notify

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Egress is network = "allowlist" (plan.Seccomp.NotifyInet). The
// command never holds an internet socket of its own making:
//
//   - socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) comes
//     here, and the supervisor hands back an unconnected AF_UNIX stream
//     socket as a placeholder (SECCOMP_IOCTL_NOTIF_ADDFD), on which an
//     internet bind() or listen() fails (EINVAL) and sendto() with an
//     address cannot connect anything (no TCP Fast Open: it is not TCP);
//   - connect() with an internet address is read once from the task's
//     memory; only the egress proxy's address is accepted, and the
//     supervisor connects a TCP socket of its own to the proxy and
//     installs it over the task's descriptor (ADDFD with SETFD), so no
//     connect the task issues ever reaches another address, and nothing
//     is resumed after the check. Every other destination fails with
//     ECONNREFUSED and is recorded.
//
// This works without pidfd_getfd (refused by Docker's default profile)
// and from inside an empty network namespace: the supervisor's socket
// lives in the launcher's.
type Egress struct {
	// Proxy is the proxy's address (IPv4, normally loopback).
	Proxy netip.AddrPort
	// Register, when set, learns the local address of each connection
	// the supervisor makes for a task, before it connects, so the proxy
	// can name the process behind each client.
	Register func(local netip.AddrPort, tid int)
	// Refused, when set, learns each destination that was refused.
	Refused func(dst netip.AddrPort, tid int)
}

// checkEgress validates an Egress for newPolicy.
func checkEgress(e *Egress) error {
	if e == nil {
		return nil
	}
	if !e.Proxy.IsValid() || !e.Proxy.Addr().Is4() || e.Proxy.Port() == 0 {
		return fmt.Errorf("notify: egress proxy %v is not an IPv4 address with a port", e.Proxy)
	}
	return nil
}

// NetworkDenied is the reason of an internet socket refused under
// network = "deny-all".
const NetworkDenied = "the profile denies the network (network = \"deny-all\")"

// inetFamily names an internet address family, as a denial's target.
func inetFamily(domain int32) string {
	if domain == unix.AF_INET6 {
		return "AF_INET6"
	}
	return "AF_INET"
}

// socket answers socket(2) for an internet TCP socket with a placeholder
// (see Egress). Anything else the filter should not have sent is refused.
func (t *task) socket() result {
	args := t.n.Data.Args
	domain, typ, proto := int32(args[0]), int32(args[1]), int32(args[2])
	eg := t.h.s.pol.egress
	const flagMask = unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC
	switch {
	case eg == nil && (domain == unix.AF_INET || domain == unix.AF_INET6):
		// network = "deny-all" (plan.Seccomp.ReportInet).
		return deny(unix.EAFNOSUPPORT, NetworkDenied, inetFamily(domain))
	case eg == nil:
		return deny(unix.EAFNOSUPPORT, "internet socket without an egress proxy", "")
	case domain != unix.AF_INET && domain != unix.AF_INET6:
		return deny(unix.EAFNOSUPPORT, "address family "+strconv.Itoa(int(domain)), "")
	case typ&0xf != unix.SOCK_STREAM:
		return deny(unix.EACCES, "network allowlist: only TCP reaches the egress proxy; UDP, raw and ICMP sockets are refused", "")
	case proto != 0 && proto != unix.IPPROTO_TCP:
		return deny(unix.EPROTONOSUPPORT, "network allowlist: protocol "+strconv.Itoa(int(proto))+" (only TCP)", "")
	case typ&^(0xf|flagMask) != 0:
		return fail(unix.EINVAL)
	}
	flags := unix.SOCK_STREAM | unix.SOCK_CLOEXEC
	if typ&unix.SOCK_NONBLOCK != 0 {
		flags |= unix.SOCK_NONBLOCK
	}
	ph, err := unix.Socket(unix.AF_UNIX, flags, 0)
	if err != nil {
		return deny(unix.EACCES, "cannot create the socket: "+err.Error(), "")
	}
	t.keep(ph)
	add := seccompNotifAddfd{ID: t.n.ID, Flags: unix.SECCOMP_ADDFD_FLAG_SEND, Srcfd: uint32(ph)}
	if typ&unix.SOCK_CLOEXEC != 0 {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", "")
	}
	// SEND (Linux 5.14) answers the call with the new number atomically;
	// before it, the number is the answer, and a task interrupted in
	// between keeps an unused descriptor.
	nfd, e := addFD(t.h.s.listener, &add)
	if e == unix.EINVAL {
		add.Flags = 0
		nfd, e = addFD(t.h.s.listener, &add)
	}
	if e != 0 {
		return deny(unix.EACCES, "cannot install the socket: "+e.Error(), "")
	}
	return result{val: int64(nfd)}
}

// inetAddr decodes a sockaddr_in or sockaddr_in6.
func inetAddr(sa []byte) (netip.AddrPort, bool) {
	family := *(*uint16)(unsafe.Pointer(&sa[0]))
	switch {
	case family == unix.AF_INET && len(sa) >= unix.SizeofSockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(sa[4:8])), binary.BigEndian.Uint16(sa[2:4])), true
	case family == unix.AF_INET6 && len(sa) >= unix.SizeofSockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(sa[8:24])), binary.BigEndian.Uint16(sa[2:4])), true
	}
	return netip.AddrPort{}, false
}

// connectInet handles connect(fd, sa) with an internet address, sa read
// once by connect.
func (t *task) connectInet(fd int32, sa []byte) result {
	eg := t.h.s.pol.egress
	family := int(*(*uint16)(unsafe.Pointer(&sa[0])))
	if eg == nil {
		return deny(unix.EAFNOSUPPORT, "address family "+strconv.Itoa(family), "")
	}
	dst, ok := inetAddr(sa)
	if !ok {
		return fail(unix.EINVAL)
	}
	if dst.Addr().Unmap() != eg.Proxy.Addr() || dst.Port() != eg.Proxy.Port() {
		if eg.Refused != nil {
			eg.Refused(dst, t.tid)
		}
		return deny(unix.ECONNREFUSED, "network allowlist: only the egress proxy "+eg.Proxy.String()+" is reachable (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY name it)", dst.String())
	}
	n := strconv.Itoa(int(fd))
	link, err := os.Readlink(procPath(t.tid, "fd/"+n))
	switch {
	case err != nil && os.IsNotExist(err):
		return fail(unix.EBADF)
	case err != nil:
		return deny(unix.EACCES, "cannot inspect the caller's descriptor "+n, "")
	case !strings.HasPrefix(link, "socket:["):
		return fail(unix.ENOTSOCK)
	}
	flags, ok := t.fdinfoFlags(n)
	if !ok {
		return deny(unix.EACCES, "cannot read the flags of the caller's descriptor "+n, "")
	}
	s, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return deny(unix.EACCES, "cannot create a socket: "+err.Error(), "")
	}
	t.keep(s)
	proxy := eg.Proxy.Addr().As4()
	// Bound before connecting: the proxy may ask who is behind this
	// port as soon as it accepts.
	if err := unix.Bind(s, &unix.SockaddrInet4{Addr: proxy}); err != nil {
		return deny(unix.EACCES, "cannot bind a socket: "+err.Error(), "")
	}
	if eg.Register != nil {
		if sn, err := unix.Getsockname(s); err == nil {
			if in4, ok := sn.(*unix.SockaddrInet4); ok {
				eg.Register(netip.AddrPortFrom(netip.AddrFrom4(in4.Addr), uint16(in4.Port)), t.tid)
			}
		}
	}
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", dst.String())
	}
	if err := unix.Connect(s, &unix.SockaddrInet4{Addr: proxy, Port: int(eg.Proxy.Port())}); err != nil {
		if en, ok := err.(unix.Errno); ok {
			return fail(en)
		}
		return fail(unix.ECONNREFUSED)
	}
	if flags&unix.O_NONBLOCK != 0 {
		if err := unix.SetNonblock(s, true); err != nil {
			return deny(unix.EACCES, "cannot set O_NONBLOCK: "+err.Error(), "")
		}
	}
	add := seccompNotifAddfd{ID: t.n.ID, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, Srcfd: uint32(s), Newfd: uint32(fd)}
	if flags&unix.O_CLOEXEC != 0 {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if e := ioctlPtr(t.h.s.listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&add)); e != 0 {
		return deny(unix.EACCES, "cannot install the connected socket: "+e.Error(), dst.String())
	}
	return result{}
}
