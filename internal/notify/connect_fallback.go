//go:build linux

package notify

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// forceNoGetfd makes the handlers behave as if pidfd_getfd were refused
// (tests only: the supervisor under test cannot put itself under Docker's
// seccomp profile).
var forceNoGetfd atomic.Bool

// taskFDPath opens the object behind the task's descriptor fd with O_PATH,
// through the magic link /proc/<tid>/fd/<fd>: the kernel does not look a
// name up, it jumps to the very file (mount and dentry) the descriptor holds,
// deleted or not. The result is a new open file, not the task's own, which
// is all the metadata handlers need (they work on O_PATH descriptors);
// sockets are the exception (see taskSocket).
func (t *task) taskFDPath(fd int32) (int, unix.Errno) {
	n := strconv.Itoa(int(fd))
	nfd, err := unix.Open(procPath(t.tid, "fd/"+n), unix.O_PATH|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		return -1, unix.EBADF
	case err != nil:
		return -1, unix.EACCES
	}
	flags, ok := t.fdinfoFlags(n)
	if !ok {
		unix.Close(nfd)
		return -1, unix.EACCES
	}
	t.reopened, t.taskOPath = true, flags&unix.O_PATH != 0
	return t.keep(nfd), 0
}

// reopenedRef adapts a call on the task's descriptor itself (fchmod,
// fchown, futimens, fsetxattr, fremovexattr, *xattrat with AT_EMPTY_PATH)
// to a descriptor from taskFDPath, which is O_PATH: the call is performed
// like its AT_EMPTY_PATH form on the same inode, except that the kernel
// refuses these calls with EBADF on a task's O_PATH descriptor, as the
// task would get.
func (t *task) reopenedRef(a *action) (result, bool) {
	if t.taskOPath {
		return fail(unix.EBADF), false
	}
	a.ref = refEmpty
	return result{}, true
}

// sockShape is what the supervisor learns of a task's unix socket without
// holding it: enough to create an equivalent unconnected socket.
type sockShape struct {
	typ      int  // SOCK_STREAM, SOCK_DGRAM or SOCK_SEQPACKET
	nonblock bool // O_NONBLOCK on the task's open file
	cloexec  bool // close-on-exec on the task's descriptor
}

// taskSocket returns the task's socket fd, duplicated with pidfd_getfd.
// Where pidfd_getfd is refused (Docker's default seccomp profile allows it
// only with CAP_SYS_PTRACE; EPERM is also what ptrace access checks give),
// it returns instead the shape of a replacement socket (see connectFresh).
func (t *task) taskSocket(st *taskStatus, fd int32) (int, *sockShape, result, bool) {
	if fd < 0 {
		return -1, nil, fail(unix.EBADF), false
	}
	if !forceNoGetfd.Load() {
		p, e := t.pidFD(st.tgid)
		if e != 0 {
			return -1, nil, fail(e), false
		}
		nfd, err := unix.PidfdGetfd(p, int(fd), 0)
		switch err {
		case nil:
			return t.keep(nfd), nil, result{}, true
		case unix.EBADF:
			return -1, nil, fail(unix.EBADF), false
		case unix.EPERM, unix.ENOSYS:
		default:
			return -1, nil, fail(unix.EACCES), false
		}
	}
	shape, r, ok := t.socketShape(fd)
	return -1, shape, r, ok
}

// socketShape reads the type and state of the task's socket fd from /proc,
// without taking the descriptor: the inode from the /proc/<tid>/fd link, the
// flags from /proc/<tid>/fdinfo, the type, state and bound address from
// /proc/<tid>/net/unix (the task's network namespace).
//
// A replacement socket carries only the type and the O_NONBLOCK and
// close-on-exec flags over. Refused (EOPNOTSUPP, a denial) where more would
// be lost: a socket that is bound (its address, and a listening queue, would
// vanish) and a task in another network namespace (the supervisor's socket
// would live in the supervisor's, where abstract names differ).
// Still lost, silently: options set before connect (SO_PASSCRED,
// SO_SNDBUF, SO_RCVTIMEO, ...), O_ASYNC and F_SETOWN, and the link to other
// descriptors of the same open file (dup'ed, inherited, in flight): those
// keep the original, unconnected socket.
func (t *task) socketShape(fd int32) (*sockShape, result, bool) {
	n := strconv.Itoa(int(fd))
	link, err := os.Readlink(procPath(t.tid, "fd/"+n))
	if err != nil {
		if os.IsNotExist(err) {
			return nil, fail(unix.EBADF), false
		}
		return nil, deny(unix.EACCES, "cannot inspect the caller's descriptor "+n, ""), false
	}
	ino, ok := strings.CutPrefix(link, "socket:[")
	if !ok {
		return nil, fail(unix.ENOTSOCK), false
	}
	ino = strings.TrimSuffix(ino, "]")
	var shape sockShape
	flags, ok := t.fdinfoFlags(n)
	if !ok {
		return nil, deny(unix.EACCES, "cannot read the flags of the caller's descriptor "+n, ""), false
	}
	shape.nonblock = flags&unix.O_NONBLOCK != 0
	shape.cloexec = flags&unix.O_CLOEXEC != 0

	var tns, sns unix.Stat_t
	if unix.Stat(procPath(t.tid, "ns/net"), &tns) != nil || unix.Stat("/proc/self/ns/net", &sns) != nil ||
		tns.Dev != sns.Dev || tns.Ino != sns.Ino {
		return nil, deny(unix.EOPNOTSUPP, "caller's socket is in another network namespace and pidfd_getfd is refused", ""), false
	}
	typ, state, bound, found := unixSocketEntry(procPath(t.tid, "net/unix"), ino)
	switch {
	case !found:
		// Not a unix socket (or gone): an inet socket rejects an
		// AF_UNIX address so.
		return nil, fail(unix.EAFNOSUPPORT), false
	case bound:
		return nil, deny(unix.EOPNOTSUPP, "caller's socket is bound; without pidfd_getfd it cannot be connected in place", ""), false
	case typ != unix.SOCK_STREAM && typ != unix.SOCK_DGRAM && typ != unix.SOCK_SEQPACKET:
		return nil, fail(unix.EPROTOTYPE), false
	case typ != unix.SOCK_DGRAM && state != ssUnconnected:
		return nil, fail(unix.EISCONN), false
	}
	shape.typ = typ
	return &shape, result{}, true
}

// ssUnconnected is SS_UNCONNECTED, the "St" of a socket neither connected
// nor connecting in /proc/net/unix.
const ssUnconnected = 1

// fdinfoFlags returns the "flags:" (octal) of /proc/<tid>/fdinfo/<n>.
func (t *task) fdinfoFlags(n string) (int, bool) {
	// One open and one read (os.ReadFile would also try the poller,
	// fstat and read to EOF): it runs at every connect the supervisor
	// handles. The "flags:" line is the second of the file, well within
	// the first read.
	fd, err := unix.Open(procPath(t.tid, "fdinfo/"+n), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	defer unix.Close(fd)
	var buf [256]byte
	k, err := unix.Read(fd, buf[:])
	for err == unix.EINTR {
		k, err = unix.Read(fd, buf[:])
	}
	if err != nil || k <= 0 {
		return 0, false
	}
	for line := range bytes.Lines(buf[:k]) {
		if v, ok := bytes.CutPrefix(line, []byte("flags:")); ok && bytes.HasSuffix(v, []byte("\n")) {
			f, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 8, 32)
			return int(f), err == nil
		}
	}
	return 0, false
}

// unixSocketEntry finds inode ino in a /proc/net/unix listing, whose lines
// read "Num RefCount Protocol Flags Type St Inode [Path]".
func unixSocketEntry(file, ino string) (typ, state int, bound, found bool) {
	f, err := os.Open(file)
	if err != nil {
		return 0, 0, false, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 7 || fields[6] != ino {
			continue
		}
		t, err1 := strconv.ParseUint(fields[4], 16, 16)
		s, err2 := strconv.ParseUint(fields[5], 16, 8)
		if err1 != nil || err2 != nil {
			return 0, 0, false, false
		}
		return int(t), int(s), len(fields) > 7, true
	}
	return 0, 0, false, false
}

// connectFresh connects a new socket of the given shape to sa (already
// checked) and, on success, installs it in the task in place of its
// descriptor fd with SECCOMP_IOCTL_NOTIF_ADDFD (SETFD: like dup2, so the
// number the task holds now names the connected socket). It runs with the
// task's credentials, so the socket's owner and the peer credentials are the
// task's. If connect fails the task's socket is left as it was.
func (t *task) connectFresh(shape *sockShape, fd int32, sa []byte, path string) result {
	typ := shape.typ | unix.SOCK_CLOEXEC
	if shape.nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	s, err := unix.Socket(unix.AF_UNIX, typ, 0)
	if err != nil {
		return deny(unix.EACCES, "cannot create a replacement socket: "+err.Error(), path)
	}
	t.keep(s)
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", path)
	}
	_, _, en := unix.Syscall(unix.SYS_CONNECT, uintptr(s), uintptr(unsafe.Pointer(&sa[0])), uintptr(len(sa)))
	if en != 0 {
		return fail(en)
	}
	add := seccompNotifAddfd{ID: t.n.ID, Flags: unix.SECCOMP_ADDFD_FLAG_SETFD, Srcfd: uint32(s), Newfd: uint32(fd)}
	if shape.cloexec {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if e := ioctlPtr(t.h.s.listener, unix.SECCOMP_IOCTL_NOTIF_ADDFD, unsafe.Pointer(&add)); e != 0 {
		// ENOENT: the call was interrupted meanwhile; the answer is
		// then discarded anyway.
		return deny(unix.EACCES, "cannot install the connected socket: "+e.Error(), path)
	}
	return result{}
}

// seccompNotifAddfd mirrors struct seccomp_notif_addfd.
type seccompNotifAddfd struct {
	ID         uint64
	Flags      uint32
	Srcfd      uint32
	Newfd      uint32
	NewfdFlags uint32
}
