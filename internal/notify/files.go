//go:build linux

package notify

import (
	"strings"

	"golang.org/x/sys/unix"
)

// isFileKind says k is a file call the supervisor handles on old Landlock
// ABIs (the seccomp filter routes them here only there; see
// plan.Seccomp.NotifyTruncate and NotifyRename): truncate(2) on ABI < 3,
// which has no TRUNCATE right, and rename and link on ABI 1, which has no
// REFER right and refuses every reparenting, even inside one writable
// root.
func isFileKind(k sysKind) bool { return k >= sysTruncate && k <= sysLinkat }

func (t *task) fileCall(kind sysKind) result {
	if kind == sysTruncate {
		return t.truncate()
	}
	return t.renameLink(kind)
}

// checkSetID refuses a chmod that would set S_ISUID on anything or S_ISGID
// on anything but a directory: such a file outlives the run, and whoever
// executes it later runs with its owner's (or group's) privileges. A
// directory's S_ISGID only makes new entries inherit its group, one the
// caller belongs to (the kernel clears the bit otherwise), so tools that set
// it (git's shared repositories, install -d -m 2775) keep working.
func checkSetID(mode, cur uint32, real string) (result, bool) {
	switch {
	case mode&unix.S_ISUID != 0:
		return deny(unix.EPERM, "set-user-ID bit", real), false
	case mode&unix.S_ISGID != 0 && cur&unix.S_IFMT != unix.S_IFDIR:
		return deny(unix.EPERM, "set-group-ID bit on a non-directory", real), false
	}
	return result{}, true
}

// truncate handles truncate(path, length): the path is resolved once, with
// the task's credentials, to a descriptor of the supervisor's, which must lie
// inside a writable root; the supervisor then truncates that very inode
// through its /proc/self/fd magic link (the kernel checks write permission
// against the task's credentials). ftruncate needs a descriptor open for
// writing, which Landlock checked at open.
func (t *task) truncate() result {
	args := t.n.Data.Args
	path, e := t.pathArg(args[0])
	if e != 0 {
		return fail(e)
	}
	length := int64(args[1])
	if length < 0 {
		return fail(unix.EINVAL)
	}
	ts, r, ok := t.idStatus(path)
	if !ok {
		return r
	}
	if r, ok := t.ownTree(path); !ok {
		return r
	}
	p, e := t.acquire(&ts, refPath, unix.AT_FDCWD, path, false)
	if e != 0 {
		return fail(e)
	}
	tc := t.h.tc
	defer tc.restore()
	if err := tc.become(&ts.cr); err != nil {
		return deny(unix.EACCES, "cannot assume the caller's credentials: "+err.Error(), path)
	}
	obj, e := t.resolve(&p, false)
	if e != 0 {
		return fail(e)
	}
	real, ok := fdPath(obj)
	if !ok {
		return deny(unix.EACCES, "cannot determine the target's path", path)
	}
	if !t.h.s.pol.writable(real) {
		return deny(unix.EACCES, "truncate outside the writable roots", real)
	}
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", real)
	}
	return fail(errnoOf(unix.Truncate(selfFD(obj), length)))
}

// renameLink handles rename, renameat, renameat2, link and linkat on
// Landlock ABI 1.
//
// The supervisor performs the call itself only when it has resolved both
// parent directories, once and with the task's credentials, to descriptors
// of its own, they are distinct and both lie inside writable roots (and, for
// a link that follows a symlink, the file linked does too); it then calls
// renameat2 or linkat on those descriptors with the last path components.
// A parent outside every root is refused with EXDEV, which is what Landlock
// answers to any reparenting on this ABI.
//
// Every other call is resumed in the kernel (SECCOMP_USER_NOTIF_FLAG_CONTINUE):
// a rename or link within one directory, or one whose paths the supervisor
// cannot resolve as the task sees them (inside the namespaces' private
// tmpfs). That is safe although the kernel re-reads the task's memory: the
// resumed call runs under the task's Landlock domain, which checks it as on
// any ABI-1 kernel and refuses every reparenting with EXDEV. So the
// supervisor adds exactly one thing to what Landlock allows: moves and links
// between two directories inside the writable roots.
func (t *task) renameLink(kind sysKind) result {
	a, e := t.renameLinkArgs(kind)
	if e != 0 {
		return fail(e)
	}
	oldDir, oldPath, newDir, newPath, flags, link := a.oldDir, a.oldPath, a.newDir, a.newPath, a.flags, a.link
	emptySrc := link && flags&unix.AT_EMPTY_PATH != 0
	// cont resumes the call in the kernel, under the task's own Landlock
	// domain; under the persistence guard's refusal of a new .git the
	// names are checked first and the call is performed on the confined
	// thread instead (create.go): a resumed call would read the names
	// again.
	cont := func() result { return result{cont: true} }
	if c := t.h.s.creator; c != nil {
		if why, ok := gitName(newPath); ok {
			return refuseGit(newPath, why)
		}
		if !link && flags&unix.RENAME_EXCHANGE != 0 {
			if why, ok := gitName(oldPath); ok {
				return refuseGit(oldPath, why)
			}
		}
		cont = func() result { return t.renameLinkConfined(oldDir, oldPath, newDir, newPath, flags, link) }
		if c.refer {
			return cont()
		}
	}
	if emptySrc {
		// The source is an open file; linking it into another
		// directory is a reparenting Landlock refuses.
		return cont()
	}
	oldParent, _ := splitParent(oldPath)
	newParent, _ := splitParent(newPath)
	if oldDir == newDir && oldParent == newParent {
		// The same directory by name: Landlock allows or refuses it on
		// its own, with no resolution here (the common case: a file
		// written beside its final name, then renamed over it).
		return cont()
	}
	ts, _, ok := t.status(oldPath)
	if !ok {
		return cont()
	}
	// With the command's own mount namespace and root, its paths are
	// resolved in its tree (inroot.go): there its guarded .git is a
	// read-only mount, which the checks below see as the kernel does.
	if r, ok := t.ownTree(oldPath); !ok {
		return r
	}
	op, e := t.acquireDir(&ts, oldDir, oldParent)
	if e != 0 {
		return cont()
	}
	var np prepared
	if newDir == oldDir && relative(oldParent) && relative(newParent) {
		// Both start from the same directory: take it once (an open of
		// /proc/TID/cwd or a pidfd_getfd less per call).
		np = prepared{base: op.base, path: newParent}
	} else if np, e = t.acquireDir(&ts, newDir, newParent); e != 0 {
		return cont()
	}
	return t.renameLinkAcross(&ts, &op, &np, a, cont)
}

// renameLinkAcross is renameLink between two parent directories, prepared
// as op and np: it resolves them with the caller's credentials and performs
// the call when both are distinct directories inside the writable roots
// (cont resumes it in the kernel when they cannot be resolved).
func (t *task) renameLinkAcross(ts *taskStatus, op, np *prepared, a renameArgs, cont func() result) result {
	oldPath, flags, link := a.oldPath, a.flags, a.link
	_, oldLast := splitParent(a.oldPath)
	_, newLast := splitParent(a.newPath)
	tc := t.h.tc
	defer tc.restore()
	if err := tc.become(&ts.cr); err != nil {
		return deny(unix.EACCES, "cannot assume the caller's credentials: "+err.Error(), oldPath)
	}
	ofd, e := t.resolve(op, false)
	if e != 0 {
		tc.restore()
		return cont()
	}
	nfd, e := t.resolve(np, false)
	if e != 0 {
		tc.restore()
		return cont()
	}
	var ost, nst unix.Stat_t
	if unix.Fstat(ofd, &ost) != nil || unix.Fstat(nfd, &nst) != nil ||
		ost.Mode&unix.S_IFMT != unix.S_IFDIR || nst.Mode&unix.S_IFMT != unix.S_IFDIR ||
		(ost.Dev == nst.Dev && ost.Ino == nst.Ino) {
		tc.restore()
		return cont()
	}
	what := "rename"
	if link {
		what = "link"
	}
	for i, fd := range []int{ofd, nfd} {
		real, ok := fdPath(fd)
		if !ok {
			return deny(unix.EXDEV, "cannot determine a parent directory's path", oldPath)
		}
		if !t.h.s.pol.entryWritable(real, []string{oldLast, newLast}[i]) {
			return deny(unix.EXDEV, what+" across directories with a side outside the writable roots (or guarded)", real)
		}
	}
	if !link && t.mountBusy(ofd, oldLast, nfd, newLast) {
		return fail(unix.EBUSY)
	}
	if (t.h.s.creator != nil || t.h.s.pol.guarding()) && !link && (t.h.s.pol.holdsGit(ofd, oldLast) || flags&unix.RENAME_EXCHANGE != 0 && t.h.s.pol.holdsGit(nfd, newLast)) {
		return refuseGit(oldPath, "a directory holding a repository's .git, moved")
	}
	if t.rowMove(ofd, oldLast, nfd, newLast) || !link && flags&unix.RENAME_EXCHANGE != 0 && t.rowMove(nfd, newLast, ofd, oldLast) {
		return fail(unix.EPERM)
	}
	src := -1
	if link && flags&unix.AT_SYMLINK_FOLLOW != 0 {
		// The file linked is where the symlink leads, not the symlink.
		p := prepared{base: ofd, path: oldLast}
		if src, e = t.resolve(&p, false); e != 0 {
			return fail(e)
		}
		real, ok := fdPath(src)
		if !ok || !t.h.s.pol.writable(real) {
			return deny(unix.EXDEV, "link of a file outside the writable roots", real)
		}
	}
	if !t.valid() {
		return deny(unix.EACCES, "notification no longer valid", oldPath)
	}
	switch {
	case !link:
		return fail(errnoOf(unix.Renameat2(ofd, oldLast, nfd, newLast, uint(flags))))
	case src >= 0:
		return fail(errnoOf(unix.Linkat(unix.AT_FDCWD, selfFD(src), nfd, newLast, unix.AT_SYMLINK_FOLLOW)))
	}
	return fail(errnoOf(unix.Linkat(ofd, oldLast, nfd, newLast, 0)))
}

// renameArgs are a rename or link call's arguments, its paths read once.
type renameArgs struct {
	oldDir, newDir   int32
	oldPath, newPath string
	flags            uint64
	link             bool
}

// renameLinkArgs decodes and checks the arguments of rename, renameat,
// renameat2, link or linkat and reads their paths.
func (t *task) renameLinkArgs(kind sysKind) (renameArgs, unix.Errno) {
	args := t.n.Data.Args
	a := renameArgs{oldDir: unix.AT_FDCWD, newDir: unix.AT_FDCWD}
	var oldAddr, newAddr uint64
	switch kind {
	case sysRename, sysLink:
		oldAddr, newAddr = args[0], args[1]
	default:
		a.oldDir, oldAddr, a.newDir, newAddr = int32(args[0]), args[1], int32(args[2]), args[3]
		if kind != sysRenameat {
			a.flags = args[4]
		}
	}
	a.link = kind == sysLink || kind == sysLinkat
	flags := a.flags
	if a.link {
		if flags&^uint64(unix.AT_SYMLINK_FOLLOW|unix.AT_EMPTY_PATH) != 0 {
			return a, unix.EINVAL
		}
	} else {
		switch {
		case flags&^uint64(unix.RENAME_NOREPLACE|unix.RENAME_EXCHANGE|unix.RENAME_WHITEOUT) != 0,
			flags&unix.RENAME_NOREPLACE != 0 && flags&unix.RENAME_EXCHANGE != 0:
			return a, unix.EINVAL
		}
		// NOREPLACE, EXCHANGE and WHITEOUT are passed on: every object
		// they move or create stays in the two checked directories
		// (EXCHANGE moves the destination into the source's directory;
		// WHITEOUT leaves a 0:0 whiteout node, which opens nothing, where
		// the source was).
	}
	emptySrc := a.link && flags&unix.AT_EMPTY_PATH != 0
	var e unix.Errno
	a.oldPath, e = t.readPath(oldAddr)
	if e == 0 && a.oldPath == "" && !emptySrc {
		e = unix.ENOENT
	}
	if e != 0 {
		return a, e
	}
	a.newPath, e = t.pathArg(newAddr)
	return a, e
}

// acquireDir takes the start of the walk to a parent directory: dirfd itself
// when parent is empty, else parent resolved from dirfd.
func (t *task) acquireDir(ts *taskStatus, dirfd int32, parent string) (prepared, unix.Errno) {
	if parent == "" {
		return t.acquire(ts, refEmpty, dirfd, "", false)
	}
	return t.acquire(ts, refPath, dirfd, parent, false)
}

// relative says parent, from splitParent, starts at the directory
// descriptor rather than at the root.
func relative(parent string) bool { return parent == "" || parent[0] != '/' }

// splitParent splits a non-empty path into its parent directory ("" for
// the start directory, "/" for the root) and its last component, which keeps
// any trailing slashes (the kernel then requires a directory). A path of
// slashes only has the last component "." (the kernel refuses to rename or
// link it).
func splitParent(p string) (parent, last string) {
	end := len(p)
	for end > 0 && p[end-1] == '/' {
		end--
	}
	if end == 0 {
		return "/", "."
	}
	i := strings.LastIndexByte(p[:end], '/')
	switch {
	case i < 0:
		return "", p
	case i == 0:
		return "/", p[1:]
	}
	parent = p[:i]
	for len(parent) > 1 && parent[len(parent)-1] == '/' {
		parent = parent[:len(parent)-1]
	}
	return parent, p[i+1:]
}

func errnoOf(err error) unix.Errno {
	if err == nil {
		return 0
	}
	if en, ok := err.(unix.Errno); ok {
		return en
	}
	return unix.EACCES
}

// renameLinkConfined performs a rename or link on names read once: on
// the handler's thread where both directories lie where Landlock grants
// everything (create.go, fast), else on the confined thread, where the
// run's own Landlock rules check it.
func (t *task) renameLinkConfined(oldDir int32, oldPath string, newDir int32, newPath string, flags uint64, link bool) result {
	ts, r, ok := t.idStatus(newPath)
	if !ok {
		return r
	}
	if r, ok := t.enterRoot(newPath); !ok {
		return r
	}
	newParent, newLast := splitParent(newPath)
	np, e := t.acquireDir(&ts, newDir, newParent)
	if e != 0 {
		return fail(e)
	}
	emptySrc := link && flags&unix.AT_EMPTY_PATH != 0
	follow := link && flags&unix.AT_SYMLINK_FOLLOW != 0 && !emptySrc
	var op prepared
	var oldLast string
	switch {
	case emptySrc:
		op, e = t.acquire(&ts, refEmpty, oldDir, "", false)
	case follow:
		// /proc/self/fd/N is the task's descriptor N (the O_TMPFILE
		// idiom).
		op, e = t.acquire(&ts, refPath, oldDir, oldPath, false)
	default:
		var oldParent string
		oldParent, oldLast = splitParent(oldPath)
		op, e = t.acquireDir(&ts, oldDir, oldParent)
	}
	if e != 0 {
		return fail(e)
	}
	if !emptySrc && !follow {
		// Both directories where Landlock grants everything: on the
		// handler's thread (create.go, fast).
		if _, en, ok := t.fast(&ts, []*prepared{&op, &np}, []string{oldLast, newLast}, func(pfds []int) (int, unix.Errno) {
			if t.rowMove(pfds[0], oldLast, pfds[1], newLast) || !link && flags&unix.RENAME_EXCHANGE != 0 && t.rowMove(pfds[1], newLast, pfds[0], oldLast) {
				return 0, unix.EPERM
			}
			if link {
				return 0, errnoOf(unix.Linkat(pfds[0], oldLast, pfds[1], newLast, 0))
			}
			return 0, errnoOf(unix.Renameat2(pfds[0], oldLast, pfds[1], newLast, uint(flags)))
		}); ok {
			return fail(en)
		}
	}
	heldGit := false
	_, en, r, ok := t.perform(&ts, func() (int, unix.Errno) {
		nfd, e := t.resolve(&np, false)
		if e != 0 {
			return 0, e
		}
		var src int
		if !emptySrc {
			// follow: the file the symlink leads to (never through a
			// magic link); else the old parent directory.
			if src, e = t.resolve(&op, false); e != 0 {
				return 0, e
			}
		}
		if !t.valid() {
			return 0, unix.EACCES
		}
		if !link && t.mountBusy(src, oldLast, nfd, newLast) {
			return 0, unix.EBUSY
		}
		if !link && (t.h.s.pol.holdsGit(src, oldLast) || flags&unix.RENAME_EXCHANGE != 0 && t.h.s.pol.holdsGit(nfd, newLast)) {
			heldGit = true
			return 0, unix.EPERM
		}
		if t.rowMove(src, oldLast, nfd, newLast) || !link && flags&unix.RENAME_EXCHANGE != 0 && t.rowMove(nfd, newLast, src, oldLast) {
			return 0, unix.EPERM
		}
		switch {
		case emptySrc:
			return 0, errnoOf(unix.Linkat(op.base, "", nfd, newLast, unix.AT_EMPTY_PATH))
		case follow:
			return 0, errnoOf(unix.Linkat(unix.AT_FDCWD, selfFD(src), nfd, newLast, unix.AT_SYMLINK_FOLLOW))
		case link:
			return 0, errnoOf(unix.Linkat(src, oldLast, nfd, newLast, 0))
		}
		return 0, errnoOf(unix.Renameat2(src, oldLast, nfd, newLast, uint(flags)))
	})
	if !ok {
		r.path = newPath
		return r
	}
	if heldGit {
		return refuseGit(oldPath, "a directory holding a repository's .git, moved")
	}
	return fail(en)
}
