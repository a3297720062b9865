//go:build linux

package probe

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ipprotoMPTCP is IPPROTO_MPTCP.
const ipprotoMPTCP = 262

var (
	loopback4 = [4]byte{127, 0, 0, 1}
	loopback6 = [16]byte{15: 1}
)

// sockTimeout bounds blocking socket calls so that a sandbox that silently
// drops packets cannot hang the probe.
var sockTimeout = unix.Timeval{Sec: 5}

// connectRetry connects fd to sa, coping with EINTR on a socket that has a
// send timeout (where connect is not restarted automatically).
func connectRetry(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	interrupted := false
	for i := 0; i < 50; i++ {
		switch err {
		case unix.EINTR:
			interrupted = true
		case unix.EALREADY:
			time.Sleep(100 * time.Millisecond)
		case unix.EISCONN:
			if interrupted {
				return nil
			}
			return err
		default:
			return err
		}
		err = unix.Connect(fd, sa)
	}
	return err
}

// connectWrite connects fd to sa and writes one byte; what names the target.
func connectWrite(fd int, sa unix.Sockaddr, what string) result {
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &sockTimeout)
	if err := connectRetry(fd, sa); err != nil {
		return blocked("connect "+what, err)
	}
	return writeByte(fd, "connected to "+what+" and wrote 1 byte")
}

// writeByte writes one byte to fd; success reports escaped with msg.
func writeByte(fd int, msg string) result {
	for {
		n, err := unix.Write(fd, []byte{'x'})
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return blocked("write", err)
		}
		if n != 1 {
			return blockedf("write: wrote %d bytes", n)
		}
		return escaped("%s", msg)
	}
}

func streamConnect(domain, proto int, sa unix.Sockaddr, what string) result {
	fd, err := unix.Socket(domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return blocked("socket", err)
	}
	defer unix.Close(fd)
	return connectWrite(fd, sa, what)
}

func vTCPConnect(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	return streamConnect(unix.AF_INET, 0, &unix.SockaddrInet4{Port: port, Addr: loopback4},
		fmt.Sprintf("127.0.0.1:%d", port))
}

func vTCP6Connect(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	return streamConnect(unix.AF_INET6, 0, &unix.SockaddrInet6{Port: port, Addr: loopback6},
		fmt.Sprintf("[::1]:%d", port))
}

func vMPTCPConnect(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, ipprotoMPTCP)
	if err == unix.EPROTONOSUPPORT || err == unix.ENOPROTOOPT {
		return na("socket(IPPROTO_MPTCP): %s (MPTCP unavailable)", errString(err))
	}
	if err != nil {
		return blocked("socket(IPPROTO_MPTCP)", err)
	}
	defer unix.Close(fd)
	return connectWrite(fd, &unix.SockaddrInet4{Port: port, Addr: loopback4},
		fmt.Sprintf("127.0.0.1:%d over MPTCP", port))
}

func vUDPSend(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return blocked("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte{'x'}, 0, &unix.SockaddrInet4{Port: port, Addr: loopback4}); err != nil {
		return blocked("sendto", err)
	}
	return escaped("sent a datagram to 127.0.0.1:%d", port)
}

func vTCPListen([]string) result {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return blocked("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: loopback4}); err != nil {
		return blocked("bind 127.0.0.1:0", err)
	}
	if err := unix.Listen(fd, 1); err != nil {
		return blocked("listen", err)
	}
	port := 0
	if sa, err := unix.Getsockname(fd); err == nil {
		if in4, ok := sa.(*unix.SockaddrInet4); ok {
			port = in4.Port
		}
	}
	return escaped("listening on 127.0.0.1:%d", port)
}

// vNetlink dumps the links over NETLINK_ROUTE; escaped when at least one
// RTM_NEWLINK answer arrives.
func vNetlink([]string) result {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_ROUTE)
	if err != nil {
		return blocked("socket(AF_NETLINK)", err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &sockTimeout)

	req := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofIfInfomsg)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.RTM_GETLINK)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // seq; pid 0 and the ifinfomsg (AF_UNSPEC) stay zero
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return blocked("sendto(RTM_GETLINK)", err)
	}

	var names []string
	buf := make([]byte, 1<<16)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			if len(names) > 0 {
				break
			}
			return blocked("recvfrom", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return blockedf("parse netlink reply: %v", err)
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				if len(names) == 0 {
					return blockedf("RTM_GETLINK dump was empty")
				}
				return escaped("RTM_GETLINK dump: %d links (%s)", len(names), strings.Join(names, ","))
			case unix.NLMSG_ERROR:
				if len(m.Data) >= 4 {
					if code := int32(ne.Uint32(m.Data)); code < 0 {
						return blocked("RTM_GETLINK", unix.Errno(-code))
					}
				}
				return blockedf("RTM_GETLINK: NLMSG_ERROR")
			case unix.RTM_NEWLINK:
				names = append(names, linkName(m))
			}
		}
	}
	return escaped("RTM_GETLINK dump: %d links (%s)", len(names), strings.Join(names, ","))
}

func linkName(m syscall.NetlinkMessage) string {
	attrs, err := syscall.ParseNetlinkRouteAttr(&m)
	if err == nil {
		for _, a := range attrs {
			if a.Attr.Type == unix.IFLA_IFNAME {
				return strings.TrimRight(string(a.Value), "\x00")
			}
		}
	}
	return "?"
}

// socketOnly creates a socket and reports its creation as the escape.
func socketOnly(domain, typ, proto int, what string) result {
	fd, err := unix.Socket(domain, typ|unix.SOCK_CLOEXEC, proto)
	if err == unix.EAFNOSUPPORT {
		return na("socket(%s): %s (address family unavailable)", what, errString(err))
	}
	if err != nil {
		return blocked("socket("+what+")", err)
	}
	unix.Close(fd)
	return escaped("created an %s socket", what)
}

func vVsock([]string) result {
	return socketOnly(unix.AF_VSOCK, unix.SOCK_STREAM, 0, "AF_VSOCK")
}

// vPacket uses protocol 0 so that the socket receives nothing until bound:
// creation alone needs CAP_NET_RAW, which is what is probed.
func vPacket([]string) result {
	return socketOnly(unix.AF_PACKET, unix.SOCK_RAW, 0, "AF_PACKET")
}

func vAbstractUnix(args []string) result {
	if args[0] == "" {
		return usage("empty abstract socket name")
	}
	// "@name" is the abstract address "\0name" for x/sys/unix.
	return streamConnect(unix.AF_UNIX, 0, &unix.SockaddrUnix{Name: "@" + args[0]},
		"abstract unix socket @"+args[0])
}

func vUnixConnect(args []string) result {
	if args[0] == "" {
		return usage("empty socket path")
	}
	return streamConnect(unix.AF_UNIX, 0, &unix.SockaddrUnix{Name: args[0]}, "unix socket "+args[0])
}

func vUnixDgram(args []string) result {
	if args[0] == "" {
		return usage("empty socket path")
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return blocked("socket", err)
	}
	defer unix.Close(fd)
	if err := unix.Sendto(fd, []byte{'x'}, 0, &unix.SockaddrUnix{Name: args[0]}); err != nil {
		return blocked("sendto "+args[0], err)
	}
	return escaped("sent a datagram to %s", args[0])
}

func vInheritedFD(args []string) result {
	fd, err := strconv.Atoi(args[0])
	if err != nil || fd < 3 { // 0-2 are the probe's own stdio (stdout carries the report)
		return usage("bad fd %q (must be >= 3)", args[0])
	}
	return writeByte(fd, fmt.Sprintf("wrote 1 byte to inherited fd %d", fd))
}

// nsGetNstype is NS_GET_NSTYPE, _IO(0xb7, 0x3): the CLONE_NEW* type of a
// namespace descriptor.
const nsGetNstype = 0xb703

// vNetnsFD looks through its own descriptors for one of a network
// namespace other than its own (a launcher's namespaces made ahead, a
// server's own), as a way out of its network namespace: found, it is
// escaped whether or not setns into it then works (the descriptor names a
// namespace the run was not given; setns's answer is in the detail). It
// asks each descriptor number itself (fstatfs, NS_GET_NSTYPE), not
// /proc/self/fd, which a sandbox may not list.
func vNetnsFD([]string) result {
	var own unix.Stat_t
	ownKnown := unix.Stat("/proc/self/ns/net", &own) == nil
	var lim unix.Rlimit
	n := 1024
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < 1<<16 {
		n = int(lim.Cur)
	}
	open := 0
	for fd := 0; fd < n; fd++ {
		var fs unix.Statfs_t
		if err := unix.Fstatfs(fd, &fs); err != nil {
			continue
		}
		open++
		if fs.Type != unix.NSFS_MAGIC {
			continue
		}
		if t, err := unix.IoctlRetInt(fd, nsGetNstype); err == nil && t != unix.CLONE_NEWNET {
			continue
		}
		var st unix.Stat_t
		if ownKnown && unix.Fstat(fd, &st) == nil && st.Ino == own.Ino && st.Dev == own.Dev {
			continue
		}
		joined := "joined it"
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			joined = errString(err)
		}
		return escaped("fd %d is a network namespace (inode %d) not the probe's own; setns: %s", fd, st.Ino, joined)
	}
	return blockedf("no descriptor of another network namespace among the %d open below %d", open, n)
}
