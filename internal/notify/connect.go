//go:build linux

package notify

import (
	"bytes"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

const (
	sockaddrStorageSize = 128 // sizeof(struct sockaddr_storage)
	sockaddrUnSize      = 110 // sizeof(struct sockaddr_un)
	sunPathOffset       = 2   // offsetof(struct sockaddr_un, sun_path)
)

// connect handles connect(fd, addr, addrlen). The supervisor connects the
// task's own socket (duplicated with pidfd_getfd) itself, to an address it
// read once; where pidfd_getfd is refused (Docker), it connects a new socket
// of the same type instead and puts it in the task's place (see
// connect_fallback.go):
//
//   - pathname sockets: the path is resolved once to an O_PATH descriptor,
//     which must lie inside a writable root or be allowlisted; the socket is
//     then connected to "/proc/self/fd/<that descriptor>", a magic link the
//     kernel resolves to exactly the checked inode;
//   - abstract sockets: refused with EPERM unless AllowAbstract;
//   - AF_UNSPEC (dissolving a datagram association) is passed on as is;
//   - any other family fails with EAFNOSUPPORT.
//
// The connection is made with the task's credentials, so the peer sees the
// task's uid and gids in SO_PEERCRED. It does see the supervisor's pid.
func (t *task) connect() result {
	args := t.n.Data.Args
	sockfd, alen := int32(args[0]), int32(args[2])
	if alen < 0 || alen > sockaddrStorageSize {
		return fail(unix.EINVAL)
	}
	var addr [sockaddrStorageSize]byte
	if alen > 0 {
		if e := t.mem.read(args[1], addr[:alen]); e != 0 {
			return fail(e)
		}
	}
	if alen < sunPathOffset {
		return fail(unix.EINVAL)
	}
	sa := addr[:alen]
	var path string
	switch family := *(*uint16)(unsafe.Pointer(&addr[0])); family {
	case unix.AF_UNSPEC:
	case unix.AF_UNIX:
		if alen == sunPathOffset || alen > sockaddrUnSize {
			return fail(unix.EINVAL)
		}
		sun := sa[sunPathOffset:]
		if sun[0] == 0 {
			if !t.h.s.pol.allowAbstract {
				return deny(unix.EPERM, "abstract unix socket", "@"+string(bytes.TrimRight(sun[1:], "\x00")))
			}
			break
		}
		if i := bytes.IndexByte(sun, 0); i >= 0 {
			sun = sun[:i]
		}
		path = string(sun)
	case unix.AF_INET, unix.AF_INET6:
		return t.connectInet(sockfd, sa)
	default:
		return deny(unix.EAFNOSUPPORT, "address family "+strconv.Itoa(int(family)), "")
	}

	st, r, ok := t.idStatus(path)
	if !ok {
		return r
	}
	sock, shape, r, ok := t.taskSocket(&st, sockfd)
	if !ok {
		return r
	}
	var p prepared
	var e unix.Errno
	if path != "" {
		if p, e = t.acquire(&st, refPath, unix.AT_FDCWD, path, false); e != 0 {
			return fail(e)
		}
	}
	tc := t.h.tc
	defer tc.restore()
	if err := tc.become(&st.cr); err != nil {
		return deny(unix.EACCES, "cannot assume the caller's credentials: "+err.Error(), path)
	}
	if path != "" {
		// Following symlinks is fine: what counts is the final object.
		obj, e := t.resolve(&p, false)
		if e != 0 {
			return fail(e)
		}
		real, ok := fdPath(obj)
		if !ok {
			return deny(unix.EACCES, "cannot determine the socket's path", path)
		}
		if !t.h.s.pol.socketAllowed(real) {
			return deny(unix.EACCES, "socket outside the writable roots and not allowlisted", real)
		}
		sa = sockaddrUnix(selfFD(obj))
	}
	if shape != nil {
		return t.connectFresh(shape, sockfd, sa, path)
	}
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", path)
	}
	_, _, en := unix.Syscall(unix.SYS_CONNECT, uintptr(sock), uintptr(unsafe.Pointer(&sa[0])), uintptr(len(sa)))
	return fail(en)
}

// sockaddrUnix encodes a struct sockaddr_un for pathname p (short: it is
// always "/proc/self/fd/N").
func sockaddrUnix(p string) []byte {
	b := make([]byte, sunPathOffset+len(p)+1)
	*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_UNIX
	copy(b[sunPathOffset:], p)
	return b
}
