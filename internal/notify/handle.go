//go:build linux

package notify

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

type sysEntry struct {
	name string
	kind sysKind
}

// result is the answer to one notification.
type result struct {
	val    int64
	errno  unix.Errno
	denied bool   // refused by the policy (as opposed to an ordinary failure)
	reason string // why, for denials
	path   string // target, for denials
	// cont lets the kernel run the call as issued
	// (SECCOMP_USER_NOTIF_FLAG_CONTINUE); only for calls whose target
	// cannot change meanwhile (see proc_targets.go), or whose every effect
	// the command's own Landlock domain still checks (see renameLink).
	cont bool
}

func deny(e unix.Errno, reason, path string) result {
	return result{errno: e, denied: true, reason: reason, path: path}
}

func fail(e unix.Errno) result { return result{errno: e} }

// opKind is the operation of a metadata call, whatever syscall requested it.
type opKind int

const (
	opChmod opKind = iota
	opChown
	opUtimes
	opSetxattr
	opRemovexattr
)

// refKind says how the task designated the object.
type refKind int

const (
	// refPath: path, relative to dirfd unless absolute. Resolved by the
	// supervisor.
	refPath refKind = iota
	// refFD: the open file behind the task's descriptor dirfd, with the
	// semantics of the classic f*() calls: an O_PATH descriptor gives EBADF.
	refFD
	// refEmpty: AT_EMPTY_PATH with an empty path: the file behind dirfd,
	// O_PATH descriptors included, or the working directory for AT_FDCWD.
	refEmpty
)

// action is a decoded metadata call.
type action struct {
	op       opKind
	ref      refKind
	dirfd    int32
	path     string
	nofollow bool

	mode     uint32            // opChmod
	uid, gid uint32            // opChown; ^0 means unchanged
	times    *[2]unix.Timespec // opUtimes; nil sets both to the current time
	xname    string            // opSetxattr, opRemovexattr
	xvalue   []byte            // opSetxattr
	xflags   int               // opSetxattr
	noop     bool              // nothing to do (utimensat with both UTIME_OMIT)
}

const unchanged = ^uint32(0)

// handler is a worker's per-thread state.
type handler struct {
	s      *server
	tc     *threadCreds
	status []byte // buffer for /proc/<tid>/status
	// procFiles: descriptors of the notifying threads' /proc entries
	// (proc.go, taskFiles).
	procFiles map[int]*taskProcFiles
	confined  *confined // the thread performing create.go's calls, started on first use
	// ownFS: the thread has unshared its filesystem attributes, so it
	// may take a task's umask (create.go's fast path).
	ownFS bool
}

// task is the state of one notification.
type task struct {
	h     *handler
	n     *seccompNotif
	tid   int
	mem   memReader
	pidfd int
	fds   []int // descriptors to close when done
	// sharedUmask: create.go's call runs on a thread sharing the
	// supervisor's umask (see modeFor).
	sharedUmask bool
	// reopened: taskFD returned a new O_PATH open of the task's
	// descriptor (taskFDPath), not the task's open file; taskOPath: the
	// task's own descriptor was O_PATH.
	reopened, taskOPath bool
	// inRoot: the task's paths are resolved in its own tree, from
	// root (inroot.go), not in the supervisor's.
	inRoot bool
	// nsTgid and nsPid are the task's ids in its own pid namespace, read
	// with the root (ownProcLink); "" when unknown.
	nsTgid, nsPid string
	root          int
	// cwd: the task's working directory, opened by cwdFD (-1: not yet).
	cwd int
	// needUmask: the call may create an entry, so its status was read
	// with the umask (status, not idStatus).
	needUmask bool
	// rowWhy: a row of plan.Plan.GuardRows refused the call (guardrows.go),
	// at rowPath.
	rowWhy, rowPath string
}

func (h *handler) handle(n *seccompNotif) (r result) {
	t := task{h: h, n: n, tid: int(n.PID), mem: memReader{tid: int(n.PID), fd: -1}, pidfd: -1, root: -1, cwd: -1}
	defer t.close()
	defer func() {
		// Never let one odd notification take the supervisor down; the
		// thread's credentials are unknown now, so retire it.
		if v := recover(); v != nil {
			h.tc.poisoned = true
			r = deny(unix.EACCES, fmt.Sprintf("internal error: %v", v), "")
		}
	}()
	ent, ok := sysTable[n.Data.Nr]
	switch {
	case !ok || n.Data.Arch != nativeArch:
		return deny(unix.EACCES, "system call not handled by the supervisor", "")
	case n.PID == 0:
		return deny(unix.EACCES, "caller not visible in the supervisor's pid namespace", "")
	case h.tc.poisoned:
		return deny(unix.EACCES, "supervisor thread unusable", "")
	}
	switch ent.kind {
	case sysConnect:
		return t.connect()
	case sysSigaction:
		return t.sigaction()
	case sysSocket:
		return t.socket()
	case sysFork:
		if h.s.forks == nil {
			return deny(unix.EAGAIN, "bounded-processes: task creation sent to a supervisor without a limit", "")
		}
		return h.s.forks.decide(t.tid)
	}
	if isProcKind(ent.kind) {
		return t.procCall(ent.kind)
	}
	if isFileKind(ent.kind) {
		return t.rowDeny(t.fileCall(ent.kind))
	}
	if isCreateKind(ent.kind) {
		return t.rowDeny(t.createCall(ent.kind))
	}
	a, e := t.decode(ent.kind)
	if e != 0 {
		return fail(e)
	}
	if a.noop {
		return result{}
	}
	return t.run(&a)
}

func (t *task) close() {
	for _, fd := range t.fds {
		unix.Close(fd)
	}
	t.fds = t.fds[:0]
	t.mem.close()
	if t.pidfd >= 0 {
		unix.Close(t.pidfd)
	}
}

func (t *task) keep(fd int) int {
	t.fds = append(t.fds, fd)
	return fd
}

func (t *task) valid() bool { return idValid(t.h.s.listener, t.n.ID) }

// readPath reads a path argument. An empty string is returned as such; the
// caller decides between ENOENT and AT_EMPTY_PATH.
func (t *task) readPath(addr uint64) (string, unix.Errno) {
	return t.mem.readString(addr, pathMax, unix.ENAMETOOLONG)
}

// pathArg reads a path argument that must not be empty.
func (t *task) pathArg(addr uint64) (string, unix.Errno) {
	p, e := t.readPath(addr)
	if e == 0 && p == "" {
		e = unix.ENOENT
	}
	return p, e
}

// atPath decodes the (dirfd, path, flags) triple of the *at() calls.
func (t *task) atPath(a *action, dirfd, addr uint64, flags uint64) unix.Errno {
	if flags&^uint64(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
		return unix.EINVAL
	}
	a.dirfd = int32(dirfd)
	a.nofollow = flags&unix.AT_SYMLINK_NOFOLLOW != 0
	p, e := t.readPath(addr)
	if e != 0 {
		return e
	}
	if p == "" {
		if flags&unix.AT_EMPTY_PATH == 0 {
			return unix.ENOENT
		}
		a.ref = refEmpty
	}
	a.path = p
	return 0
}

// xattrAtPath decodes the (dirfd, path, at_flags) of setxattrat and
// removexattrat. With AT_EMPTY_PATH and an empty or NULL path they act on the
// open file behind dirfd, like fsetxattr/fremovexattr.
func (t *task) xattrAtPath(a *action, dirfd, addr uint64, flags uint64) unix.Errno {
	if flags&^uint64(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
		return unix.EINVAL
	}
	a.dirfd = int32(dirfd)
	a.nofollow = flags&unix.AT_SYMLINK_NOFOLLOW != 0
	empty := flags&unix.AT_EMPTY_PATH != 0
	if addr == 0 && empty {
		a.ref = refFD
		return 0
	}
	p, e := t.readPath(addr)
	if e != 0 {
		return e
	}
	if p == "" {
		if !empty {
			return unix.ENOENT
		}
		a.ref = refFD
	}
	a.path = p
	return 0
}

// readInto reads len(*v) bytes of task memory into the value v points to.
func readInto[T any](t *task, addr uint64, v *T) unix.Errno {
	return t.mem.read(addr, unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v)))
}

// xattrArgs decodes name, value and flags of the setxattr family, in the
// order the kernel checks them.
func (t *task) xattrArgs(a *action, nameAddr, valueAddr, size, flags uint64) unix.Errno {
	name, e := t.mem.readString(nameAddr, xattrNameMax+1, unix.ERANGE)
	if e != 0 {
		return e
	}
	if name == "" {
		return unix.ERANGE
	}
	a.xname = name
	if a.op == opRemovexattr {
		return 0
	}
	if flags&^uint64(unix.XATTR_CREATE|unix.XATTR_REPLACE) != 0 {
		return unix.EINVAL
	}
	a.xflags = int(flags)
	if size > xattrSizeMax {
		return unix.E2BIG
	}
	a.xvalue = make([]byte, size)
	return t.mem.read(valueAddr, a.xvalue)
}

// decode turns the notification's raw arguments into an action, reading all
// task memory it needs exactly once.
func (t *task) decode(kind sysKind) (action, unix.Errno) {
	a := action{dirfd: unix.AT_FDCWD}
	if e, ok := refusedByKernel()[kind]; ok {
		return a, e
	}
	var e unix.Errno
	switch kind {
	case sysChmod, sysFchmod, sysFchmodat, sysFchmodat2:
		e = t.decodeChmod(kind, &a)
	case sysChown, sysLchown, sysFchown, sysFchownat:
		e = t.decodeChown(kind, &a)
	case sysUtime, sysUtimes, sysFutimesat:
		e = t.decodeUtimes(kind, &a)
	case sysUtimensat:
		e = t.decodeUtimensat(&a)
	case sysSetxattr, sysLsetxattr, sysFsetxattr, sysSetxattrat:
		e = t.decodeSetxattr(kind, &a)
	case sysRemovexattr, sysLremovexattr, sysFremovexattr, sysRemovexattrat:
		e = t.decodeRemovexattr(kind, &a)
	default:
		e = unix.ENOSYS
	}
	return a, e
}

// decodeChmod decodes chmod, fchmod, fchmodat and fchmodat2.
func (t *task) decodeChmod(kind sysKind, a *action) (e unix.Errno) {
	args := t.n.Data.Args
	a.op = opChmod
	switch kind {
	case sysChmod:
		a.mode = uint32(args[1]) & 0xffff
		a.path, e = t.pathArg(args[0])
	case sysFchmod:
		a.mode = uint32(args[1]) & 0xffff
		a.ref, a.dirfd = refFD, int32(args[0])
	case sysFchmodat:
		a.mode = uint32(args[2]) & 0xffff
		a.dirfd = int32(args[0])
		a.path, e = t.pathArg(args[1])
	case sysFchmodat2:
		a.mode = uint32(args[2]) & 0xffff
		e = t.atPath(a, args[0], args[1], args[3])
	}
	return e
}

// decodeChown decodes chown, lchown, fchown and fchownat.
func (t *task) decodeChown(kind sysKind, a *action) (e unix.Errno) {
	args := t.n.Data.Args
	a.op = opChown
	switch kind {
	case sysChown, sysLchown:
		a.uid, a.gid = uint32(args[1]), uint32(args[2])
		a.nofollow = kind == sysLchown
		a.path, e = t.pathArg(args[0])
	case sysFchown:
		a.uid, a.gid = uint32(args[1]), uint32(args[2])
		a.ref, a.dirfd = refFD, int32(args[0])
	case sysFchownat:
		a.uid, a.gid = uint32(args[2]), uint32(args[3])
		e = t.atPath(a, args[0], args[1], args[4])
	}
	return e
}

// decodeUtimes decodes utime, utimes and futimesat.
func (t *task) decodeUtimes(kind sysKind, a *action) unix.Errno {
	args := t.n.Data.Args
	a.op = opUtimes
	if kind == sysUtime {
		if args[1] != 0 {
			var ub [2]int64 // struct utimbuf {actime, modtime}
			if e := readInto(t, args[1], &ub); e != 0 {
				return e
			}
			a.times = &[2]unix.Timespec{{Sec: ub[0]}, {Sec: ub[1]}}
		}
		var e unix.Errno
		a.path, e = t.pathArg(args[0])
		return e
	}
	pathAddr, tvAddr := args[0], args[1]
	if kind == sysFutimesat {
		a.dirfd = int32(args[0])
		pathAddr, tvAddr = args[1], args[2]
	}
	if tvAddr != 0 {
		var tv [2]unix.Timeval
		if e := readInto(t, tvAddr, &tv); e != 0 {
			return e
		}
		for _, v := range tv {
			if v.Usec < 0 || v.Usec >= 1000000 {
				return unix.EINVAL
			}
		}
		a.times = &[2]unix.Timespec{
			{Sec: tv[0].Sec, Nsec: tv[0].Usec * 1000},
			{Sec: tv[1].Sec, Nsec: tv[1].Usec * 1000},
		}
	}
	if kind == sysFutimesat && pathAddr == 0 && a.dirfd != unix.AT_FDCWD {
		a.ref = refFD // futimes() of old C libraries
		return 0
	}
	var e unix.Errno
	a.path, e = t.pathArg(pathAddr)
	return e
}

// decodeUtimensat decodes utimensat (and futimens, its NULL-path form).
func (t *task) decodeUtimensat(a *action) unix.Errno {
	args := t.n.Data.Args
	a.op = opUtimes
	if args[2] != 0 {
		var ts [2]unix.Timespec
		if e := readInto(t, args[2], &ts); e != 0 {
			return e
		}
		if ts[0].Nsec == unix.UTIME_OMIT && ts[1].Nsec == unix.UTIME_OMIT {
			// The kernel returns success without even looking up the
			// path.
			a.noop = true
			return 0
		}
		if ts[0].Nsec != unix.UTIME_NOW || ts[1].Nsec != unix.UTIME_NOW {
			a.times = &ts
		}
	}
	if args[1] == 0 {
		// futimens(): NULL path means the file behind dirfd.
		if int32(args[0]) == unix.AT_FDCWD {
			return unix.EFAULT
		}
		if args[3] != 0 {
			return unix.EINVAL
		}
		a.ref, a.dirfd = refFD, int32(args[0])
		return 0
	}
	return t.atPath(a, args[0], args[1], args[3])
}

// decodeSetxattr decodes setxattr, lsetxattr, fsetxattr and setxattrat.
func (t *task) decodeSetxattr(kind sysKind, a *action) unix.Errno {
	args := t.n.Data.Args
	a.op = opSetxattr
	switch kind {
	case sysFsetxattr:
		a.ref, a.dirfd = refFD, int32(args[0])
		return t.xattrArgs(a, args[1], args[2], args[3], args[4])
	case sysSetxattrat:
		// struct xattr_args {__aligned_u64 value; __u32 size; __u32 flags;}
		// extensible: a larger struct is fine if the extra bytes are zero.
		usize := args[5]
		switch {
		case args[2]&^uint64(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0:
			return unix.EINVAL
		case usize < 16:
			return unix.EINVAL
		case usize > pageSize:
			return unix.E2BIG
		}
		raw := make([]byte, usize)
		if e := t.mem.read(args[4], raw); e != 0 {
			return e
		}
		if slices.ContainsFunc(raw[16:], func(b byte) bool { return b != 0 }) {
			return unix.E2BIG
		}
		xa := (*struct {
			Value uint64
			Size  uint32
			Flags uint32
		})(unsafe.Pointer(&raw[0]))
		if e := t.xattrArgs(a, args[3], xa.Value, uint64(xa.Size), uint64(xa.Flags)); e != 0 {
			return e
		}
		return t.xattrAtPath(a, args[0], args[1], args[2])
	}
	a.nofollow = kind == sysLsetxattr
	if e := t.xattrArgs(a, args[1], args[2], args[3], args[4]); e != 0 {
		return e
	}
	var e unix.Errno
	a.path, e = t.pathArg(args[0])
	return e
}

// decodeRemovexattr decodes removexattr, lremovexattr, fremovexattr and
// removexattrat.
func (t *task) decodeRemovexattr(kind sysKind, a *action) unix.Errno {
	args := t.n.Data.Args
	a.op = opRemovexattr
	switch kind {
	case sysFremovexattr:
		a.ref, a.dirfd = refFD, int32(args[0])
		return t.xattrArgs(a, args[1], 0, 0, 0)
	case sysRemovexattrat:
		if args[2]&^uint64(unix.AT_SYMLINK_NOFOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return unix.EINVAL
		}
		if e := t.xattrArgs(a, args[3], 0, 0, 0); e != 0 {
			return e
		}
		return t.xattrAtPath(a, args[0], args[1], args[2])
	}
	a.nofollow = kind == sysLremovexattr
	if e := t.xattrArgs(a, args[1], 0, 0, 0); e != 0 {
		return e
	}
	var e unix.Errno
	a.path, e = t.pathArg(args[0])
	return e
}

// pidFD returns a pidfd for the notifying thread (needed by pidfd_getfd).
func (t *task) pidFD(tgid int) (int, unix.Errno) {
	if t.pidfd >= 0 {
		return t.pidfd, 0
	}
	fd, err := unix.PidfdOpen(t.tid, unix.PIDFD_THREAD)
	if err != nil && tgid > 0 {
		// Before Linux 6.9 only thread-group leaders have pidfds; the
		// descriptor table is normally shared by all threads anyway.
		fd, err = unix.PidfdOpen(tgid, 0)
	}
	if err != nil {
		return -1, unix.EACCES
	}
	t.pidfd = fd
	return fd, 0
}

// taskFD duplicates the task's descriptor fd into the supervisor. The copy
// refers to the very same open file, so no path is resolved again. Where
// pidfd_getfd is refused (Docker without CAP_SYS_PTRACE), see taskFDPath.
func (t *task) taskFD(tgid int, fd int32) (int, unix.Errno) {
	if fd < 0 {
		return -1, unix.EBADF
	}
	if forceNoGetfd.Load() {
		return t.taskFDPath(fd)
	}
	p, e := t.pidFD(tgid)
	if e != 0 {
		return -1, e
	}
	nfd, err := unix.PidfdGetfd(p, int(fd), 0)
	switch {
	case err == unix.EBADF:
		return -1, unix.EBADF
	case err == unix.EPERM || err == unix.ENOSYS:
		return t.taskFDPath(fd)
	case err != nil:
		return -1, unix.EACCES
	}
	return t.keep(nfd), 0
}

// cwdFD opens the task's working directory.
//
// It is opened once per notification: a rename or link of relative paths
// starts both walks there, and the two then resolve the same parent once
// (create.go, fast).
func (t *task) cwdFD() (int, unix.Errno) {
	if t.cwd >= 0 {
		return t.cwd, 0
	}
	fd, err := t.openProc("cwd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return -1, unix.EACCES
	}
	t.cwd = t.keep(fd)
	return t.cwd, 0
}

// openProc opens /proc/<tid>/name: relative to the handler's descriptor of
// /proc/<tid> (proc.go, taskFiles) where it has one, which saves the walk
// through /proc; by path where it has none or the open through it fails
// (the descriptor's thread may be gone and the number another's).
func (t *task) openProc(name string, flags int) (int, error) {
	if f, ok := t.h.procFiles[t.tid]; ok {
		if fd, err := unix.Openat(f.dir, name, flags, 0); err == nil {
			return fd, nil
		}
	}
	return unix.Open(procPath(t.tid, name), flags, 0)
}

// procSelfFD recognises "/proc/self/fd/N", "/proc/thread-self/fd/N" and
// "/dev/fd/N", which C libraries use to operate on O_PATH descriptors (e.g.
// glibc's fchmodat with AT_SYMLINK_NOFOLLOW before fchmodat2). Resolved by the
// supervisor, "self" would mean the supervisor (and the magic link would be
// refused), so such a path is mapped to the task's descriptor N instead.
func procSelfFD(p string) (int32, bool) {
	var rest string
	ok := false
	for _, prefix := range []string{"/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/"} {
		if rest, ok = strings.CutPrefix(p, prefix); ok {
			break
		}
	}
	if !ok || rest == "" || rest[0] == '0' && len(rest) > 1 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// prepared holds what was acquired for the task with the supervisor's own
// credentials, before switching to the task's.
type prepared struct {
	base int    // object (refFD, refEmpty) or start directory (refPath)
	path string // path to resolve from base, "" when base is the object
}

// status reads the task's credentials and umask and checks that it shares
// the supervisor's root directory: absolute paths are resolved from the
// supervisor's root, which is only right when the task has the same one.
func (t *task) status(what string) (taskStatus, result, bool) {
	t.needUmask = true
	return t.readStatus(what, true)
}

// idStatus is status for a call that creates no entry: without the umask
// (-1), which lets the handler read less (proc.go, keptStatus).
func (t *task) idStatus(what string) (taskStatus, result, bool) {
	return t.readStatus(what, false)
}

func (t *task) readStatus(what string, umask bool) (taskStatus, result, bool) {
	st, ok := t.h.readStatus(t.tid, umask)
	if !ok {
		return st, deny(unix.EACCES, "cannot read the caller's credentials", what), false
	}
	if f := t.h.procFiles[t.tid]; f.root == 0 {
		// Once per thread: its root never changes (taskProcFiles).
		f.root = -1
		if root, ok := readlinkAt(f.dir, "root"); ok && root == "/" {
			f.root = 1
		}
	}
	if t.h.procFiles[t.tid].root != 1 {
		return st, deny(unix.EACCES, "caller's root directory differs from the supervisor's", what), false
	}
	return st, result{}, true
}

// acquire does the part of the resolution that needs the supervisor's own
// privileges: taking the task's descriptors or working directory.
func (t *task) acquire(st *taskStatus, ref refKind, dirfd int32, path string, nofollow bool) (prepared, unix.Errno) {
	var p prepared
	procFD := false
	if ref == refPath && !nofollow {
		if n, ok := procSelfFD(path); ok {
			ref, dirfd, path, procFD = refEmpty, n, "", true
		}
	}
	var e unix.Errno
	switch {
	case ref == refFD:
		p.base, e = t.taskFD(st.tgid, dirfd)
	case ref == refEmpty && dirfd == unix.AT_FDCWD:
		p.base, e = t.cwdFD()
	case ref == refEmpty:
		p.base, e = t.taskFD(st.tgid, dirfd)
	case strings.HasPrefix(path, "/") && t.inRoot:
		p.base, e = t.rootFD()
		p.path = path
	case strings.HasPrefix(path, "/"):
		p.base, p.path = unix.AT_FDCWD, path
	case dirfd == unix.AT_FDCWD:
		p.base, e = t.cwdFD()
		p.path = path
	default:
		p.base, e = t.taskFD(st.tgid, dirfd)
		p.path = path
	}
	if procFD && e == unix.EBADF {
		// The kernel finds no such entry in /proc/self/fd.
		e = unix.ENOENT
	}
	return p, e
}

// resolve opens the object designated by p with O_PATH. It runs with the
// task's credentials, so the walk needs the search permissions the task would
// need. Magic links (/proc/<pid>/fd/..., /proc/<pid>/cwd, ...) are not
// followed: resolved by the supervisor they would lead to the supervisor's
// objects or to arbitrary places.
func (t *task) resolve(p *prepared, nofollow bool) (int, unix.Errno) {
	if p.path == "" {
		return p.base, 0
	}
	if t.inRoot {
		return t.walk(p.base, p.path, !nofollow)
	}
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_MAGICLINKS,
	}
	if nofollow {
		how.Flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat2(p.base, p.path, &how)
	if err != nil {
		if en, ok := err.(unix.Errno); ok {
			return -1, en
		}
		return -1, unix.EACCES
	}
	return t.keep(fd), 0
}

// run carries out a decoded metadata call.
func (t *task) run(a *action) result {
	ts, r, ok := t.idStatus(a.path)
	if !ok {
		return r
	}
	if r, ok := t.ownTree(a.path); !ok {
		return r
	}
	p, e := t.acquire(&ts, a.ref, a.dirfd, a.path, a.nofollow)
	if e != 0 {
		return fail(e)
	}
	if a.ref == refFD && t.reopened {
		if r, ok := t.reopenedRef(a); !ok {
			return r
		}
	}
	cr := &ts.cr
	tc := t.h.tc
	defer tc.restore()
	if err := tc.become(cr); err != nil {
		return deny(unix.EACCES, "cannot assume the caller's credentials: "+err.Error(), a.path)
	}
	obj, e := t.resolve(&p, a.nofollow)
	if e != 0 {
		return fail(e)
	}
	var st unix.Stat_t
	if err := unix.Fstat(obj, &st); err != nil {
		return deny(unix.EACCES, "cannot stat the target", a.path)
	}
	real, ok := fdPath(obj)
	if !ok {
		return deny(unix.EACCES, "cannot determine the target's path", a.path)
	}
	if !t.h.s.pol.writable(real) {
		return deny(unix.EACCES, "target outside the writable roots", real)
	}
	if r, ok := checkPerm(a, &st, cr, real); !ok {
		return r
	}
	// Everything the decision rests on is in hand. The task must still be
	// waiting in this very call: otherwise its pid, and so everything read
	// through /proc/<pid>, might belong to another process by now.
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", real)
	}
	return fail(perform(a, obj))
}

// checkPerm emulates the owner checks the kernel makes for these calls, as
// a belt on top of the kernel's own checks (which run against the task's
// credentials too). A confined task never holds capabilities, so uid 0 is
// treated like any other uid.
func checkPerm(a *action, st *unix.Stat_t, cr *creds, real string) (result, bool) {
	owner := cr.fsuid == st.Uid
	isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
	switch a.op {
	case opChmod:
		if isLink {
			return fail(unix.EOPNOTSUPP), false
		}
		if !owner {
			return deny(unix.EPERM, "chmod of a file the caller does not own", real), false
		}
		if r, ok := checkSetID(a.mode, st.Mode, real); !ok {
			return r, false
		}
	case opChown:
		if a.uid != unchanged && (!owner || a.uid != st.Uid) {
			return deny(unix.EPERM, "chown to another user", real), false
		}
		if a.gid != unchanged && (!owner || (a.gid != st.Gid && !cr.inGroup(a.gid))) {
			return deny(unix.EPERM, "chgrp to a group the caller is not in, or of a file it does not own", real), false
		}
	case opUtimes:
		// Setting both times to "now" needs ownership or write
		// permission; the kernel checks the latter against the task's
		// credentials. Explicit times need ownership.
		if a.times != nil && !owner {
			return deny(unix.EPERM, "setting explicit times on a file the caller does not own", real), false
		}
	case opSetxattr, opRemovexattr:
		ns, _, _ := strings.Cut(a.xname, ".")
		switch {
		case ns == "user":
			if st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR {
				return fail(unix.EPERM), false
			}
			// The kernel needs only write permission; requiring
			// ownership is deliberately stricter.
			if !owner {
				return deny(unix.EACCES, "user xattr on a file the caller does not own", real), false
			}
		case a.xname == "system.posix_acl_access" || a.xname == "system.posix_acl_default":
			if isLink {
				return fail(unix.EOPNOTSUPP), false
			}
			if !owner {
				return deny(unix.EPERM, "ACL on a file the caller does not own", real), false
			}
		case ns == "security" || ns == "trusted" || ns == "system":
			return deny(unix.EPERM, "xattr namespace "+ns+" is reserved", real), false
		default:
			return fail(unix.EOPNOTSUPP), false
		}
		if isLink {
			// Only reachable with lsetxattr & co.; nothing above may be
			// set on a symlink, and /proc/self/fd/N could not name it.
			return fail(unix.EPERM), false
		}
	}
	return result{}, true
}

// perform executes the operation on the supervisor's descriptor obj, which
// refers to exactly the object that was checked. With refFD the classic
// descriptor call is used so that an O_PATH descriptor fails with EBADF as it
// would have for the task.
func perform(a *action, obj int) unix.Errno {
	var err error
	switch a.op {
	case opChmod:
		if a.ref == refFD {
			err = unix.Fchmod(obj, a.mode)
			break
		}
		_, _, en := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(obj), uintptr(unsafe.Pointer(&emptyPath[0])), uintptr(a.mode), unix.AT_EMPTY_PATH, 0, 0)
		if en == unix.ENOSYS {
			// Before Linux 6.6: the magic link reaches the same inode.
			err = unix.Fchmodat(unix.AT_FDCWD, selfFD(obj), a.mode, 0)
		} else if en != 0 {
			err = en
		}
	case opChown:
		uid, gid := int(int32(a.uid)), int(int32(a.gid))
		if a.ref == refFD {
			err = unix.Fchown(obj, uid, gid)
		} else {
			err = unix.Fchownat(obj, "", uid, gid, unix.AT_EMPTY_PATH)
		}
	case opUtimes:
		var tp uintptr
		if a.times != nil {
			tp = uintptr(unsafe.Pointer(a.times))
		}
		var en unix.Errno
		if a.ref == refFD {
			_, _, en = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(obj), 0, tp, 0, 0, 0)
		} else {
			_, _, en = unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(obj), uintptr(unsafe.Pointer(&emptyPath[0])), tp, unix.AT_EMPTY_PATH, 0, 0)
		}
		if en != 0 {
			err = en
		}
	case opSetxattr:
		if a.ref == refFD {
			err = unix.Fsetxattr(obj, a.xname, a.xvalue, a.xflags)
		} else {
			// O_PATH descriptors cannot be used with fsetxattr; the magic
			// link resolves to the very inode that was checked (never a
			// symlink here: checkPerm refused those).
			err = unix.Setxattr(selfFD(obj), a.xname, a.xvalue, a.xflags)
		}
	case opRemovexattr:
		if a.ref == refFD {
			err = unix.Fremovexattr(obj, a.xname)
		} else {
			err = unix.Removexattr(selfFD(obj), a.xname)
		}
	}
	if err == nil {
		return 0
	}
	if en, ok := err.(unix.Errno); ok {
		return en
	}
	return unix.EACCES
}

var emptyPath = [1]byte{0}

func selfFD(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }
