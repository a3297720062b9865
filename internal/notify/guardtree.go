//go:build linux

package notify

import (
	"golang.org/x/sys/unix"
)

// The core's guarded work tree (plan.Seccomp.NotifyGuardTree). Without
// namespaces Landlock keeps a work tree's .git read-only by granting the
// work tree's entries one by one (plan.Plan.LandlockGuarded): the work tree
// itself gets read and execute only. An entry made during the run (a
// build directory, node_modules, .venv, an output binary) is then covered
// by no rule but the work tree's, so the command could not write inside
// it, nor remove it. The supervisor performs those calls instead:
//
//   - calls that add, remove or replace an entry (create.go, files.go,
//     removeCall) are performed on the handler's thread with the task's
//     credentials and umask wherever the parent directory is writable and
//     the entry is not a guarded path nor on the way to one
//     (policy.entryWritable);
//   - an open for writing or with O_TRUNC (openWrite) and truncate(2) of a
//     regular file inside the writable roots and outside the guarded
//     paths is performed on the handler's thread and its descriptor
//     installed into the task.
//
// Every other such call is resumed in the kernel (SECCOMP_USER_NOTIF_FLAG_
// CONTINUE), where the task's own Landlock domain decides: the supervisor
// then grants nothing, so the kernel reading the path again is harmless.

// removeCall handles unlink, unlinkat and rmdir.
func (t *task) removeCall(kind sysKind) result {
	args := t.n.Data.Args
	dirfd := int32(unix.AT_FDCWD)
	var addr uint64
	flags := 0
	switch kind {
	case sysUnlink:
		addr = args[0]
	case sysRmdir:
		addr, flags = args[0], unix.AT_REMOVEDIR
	default:
		dirfd, addr, flags = int32(args[0]), args[1], int(args[2])
		if flags&^unix.AT_REMOVEDIR != 0 {
			return fail(unix.EINVAL)
		}
	}
	path, e := t.pathArg(addr)
	if e != 0 {
		return fail(e)
	}
	parent, last := splitParent(path)
	if last == "." || last == ".." {
		return cont()
	}
	ts, _, ok := t.idStatus(path)
	if !ok {
		return cont()
	}
	pp, e := t.acquireDir(&ts, dirfd, parent)
	if e != 0 {
		return cont()
	}
	if _, en, ok := t.fast(&ts, []*prepared{&pp}, []string{last}, func(pfds []int) (int, unix.Errno) {
		return 0, errnoOf(unix.Unlinkat(pfds[0], last, flags))
	}); ok {
		return fail(en)
	}
	return cont()
}

// openWrite handles open and openat without O_CREAT (the filter sends
// those opened for writing or with O_TRUNC): a regular file inside the
// writable roots and outside the guarded paths is opened here, with the
// task's credentials, through the descriptor the path resolved to.
func (t *task) openWrite(kind sysKind) result {
	args := t.n.Data.Args
	dirfd := int32(unix.AT_FDCWD)
	var addr uint64
	var flags int
	if kind == sysOpen {
		addr, flags = args[0], int(int32(args[1]))
	} else {
		dirfd, addr, flags = int32(args[0]), args[1], int(int32(args[2]))
	}
	flags &= openFlags
	if flags&(unix.O_PATH|unix.O_DIRECTORY) != 0 || flags&unix.O_TMPFILE == unix.O_TMPFILE {
		return cont()
	}
	path, e := t.pathArg(addr)
	if e != 0 || t.inRoot {
		return cont()
	}
	if _, ok := stdFD(path); ok {
		return cont()
	}
	ts, _, ok := t.idStatus(path)
	if !ok {
		return cont()
	}
	nofollow := flags&unix.O_NOFOLLOW != 0
	p, e := t.acquire(&ts, refPath, dirfd, t.ownProc(&ts, path), nofollow)
	if e != 0 {
		return cont()
	}
	tc := t.h.tc
	defer tc.restore()
	if tc.become(&ts.cr) != nil {
		return cont()
	}
	obj, e := t.resolve(&p, nofollow)
	if e != 0 {
		return cont()
	}
	var st unix.Stat_t
	if unix.Fstat(obj, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		// Directories, symlinks (O_NOFOLLOW), FIFOs and devices: the
		// kernel's answer, under the task's Landlock domain.
		return cont()
	}
	real, ok := fdPath(obj)
	if !ok || !t.h.s.pol.writable(real) {
		return cont()
	}
	if !t.valid() {
		return fail(unix.EACCES)
	}
	fd, err := unix.Open(selfFD(obj), (flags&^unix.O_NOFOLLOW)|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(errnoOf(err))
	}
	tc.restore()
	return t.install(fd, flags)
}
