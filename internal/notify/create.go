//go:build linux

package notify

import (
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// Create is the persistence guard's refusal of a new .git anywhere the
// command can write (plan.Seccomp.NotifyCreate), for a run that guards
// a git work tree and shares the supervisor's root and mount namespace
// (the core).
//
// No Landlock rule and no mount refuses a name, and a seccomp filter cannot
// read one. So every call that adds a name to a directory comes here: mkdir,
// mkdirat, symlink, symlinkat, mknod, mknodat, creat, open and openat with
// O_CREAT, rename, renameat, renameat2, link and linkat. The supervisor
// reads the names once from the task's memory and refuses a new entry whose
// name git, or a case-insensitive file system the tree is later copied to,
// takes for .git (gitName). Every other call is performed by the supervisor
// itself, on its copy of the names, never resumed in the kernel: a second
// thread of the command could rewrite the name between the check and the
// kernel's own read.
//
// The supervisor performs them on a thread of its own confined by the run's
// own Landlock rules (the plan's Landlock and LandlockGuarded: their
// network and scope parts are left out, they govern nothing those threads
// do) and with the task's credentials and umask,
// so the kernel checks each call exactly as it would have checked the
// command's; an O_CREAT open is then installed into the task with
// SECCOMP_IOCTL_NOTIF_ADDFD. Parent directories are resolved without
// following magic links (/proc/self would be the supervisor's).
//
// What the performing threads need besides InRoot they read from the plan
// (Config.Plan; see creator).
type Create struct {
	// InRoot are rules of Landlock the command's init added in its own
	// mount namespace (its private tmpfs directories): the performing
	// threads add them too, each path resolved in the command's root
	// (they do not reuse the command's ruleset itself, whose network and
	// scope parts they leave out: see newCreator).
	InRoot []landlock.Deferred
}

// gitNames are the names a new directory entry may not have while the
// guard holds, each with why git could take it for a repository's .git.
// Not covered: HFS+'s ignorable Unicode code points (".g\u200cit"), which
// only a macOS HFS+ volume folds.
var gitNames = []struct {
	why   string
	match func(string) bool
}{
	{"named .git", func(n string) bool { return n == ".git" }},
	// A casefolded directory (ext4, f2fs, tmpfs) resolves .git to
	// such an entry, and so does a case-insensitive file system the
	// tree is copied to (macOS, Windows).
	{"a letter-case variant of .git", func(n string) bool { return n != ".git" && strings.EqualFold(n, ".git") }},
	{".git with trailing dots or spaces, which NTFS drops",
		func(n string) bool {
			t := strings.TrimRight(n, ". ")
			return t != n && strings.EqualFold(t, ".git")
		}},
	{"git~1, the NTFS 8.3 short name of .git",
		func(n string) bool { return strings.EqualFold(n, "git~1") }},
}

// gitName reports whether the last component of p (trailing slashes
// ignored) is one of gitNames, and why.
func gitName(p string) (string, bool) {
	_, last := splitParent(p)
	last = strings.TrimRight(last, "/")
	for _, g := range gitNames {
		if g.match(last) {
			return g.why, true
		}
	}
	return "", false
}

// refuseGit is the answer to a call that would create a gitNames entry.
func refuseGit(path, why string) result {
	return deny(unix.EPERM, "persistence guard: new entry "+why+" refused; waive no-git-persistence to allow it", path)
}

// isCreateKind says k is one of create.go's calls.
func isCreateKind(k sysKind) bool { return k >= sysMkdir && k <= sysSetgroups }

// creator holds the Landlock ruleset of the performing threads, prepared on
// the first call that needs it (most runs create nothing through it before
// they have run a while, and a launch should not pay for it).
type creator struct {
	Create
	// landlock is the run's filesystem policy, which the performing
	// threads enforce on themselves, and guarded the paths it keeps
	// read-only (plan.Plan.LandlockGuarded).
	landlock plan.Landlock
	guarded  []string
	// refer says Landlock governs renames and links across directories
	// (ABI >= 2): they are performed on the confined thread too.
	// Without it (ABI 1, plan.Seccomp.NotifyRename) renameLink's
	// emulation performs those across directories, after the same name
	// check.
	refer bool
	// namespaced: the command has its own mount namespace and root
	// (landlock+namespaces). Its paths are then resolved in its own
	// tree (inroot.go) and every call goes to the confined thread: the
	// fast path's path checks are the supervisor's view. Without refer
	// (ABI 1) renames and links across directories go to renameLink's
	// emulation, which resolves in the command's tree too (ownTree).
	namespaced bool
	once       sync.Once
	rs         *landlock.Ruleset
	err        error
}

func newCreator(c *Create, p *plan.Plan) *creator {
	if c == nil {
		return nil
	}
	cc := &creator{Create: *c, landlock: p.Landlock, guarded: p.LandlockGuarded(),
		refer: !p.Seccomp.NotifyRename, namespaced: p.Backend == plan.BackendNamespaces}
	cc.landlock.DenyTCP, cc.landlock.Scope = false, false
	// The ruleset is prepared on the first call that needs it, maybe
	// long after the launch: a granted path the command (or anyone)
	// removed since then must not fail every later call. A path that is
	// gone grants nothing the thread could use, so it is skipped.
	l := &cc.landlock
	l.Optional = slices.Concat(l.Optional, l.ReadExec, l.ReadWrite, l.Devices)
	return cc
}

// ruleset prepares the performing threads' ruleset; root is the command's
// root directory, for InRoot.
func (c *creator) ruleset(root int) (*landlock.Ruleset, error) {
	c.once.Do(func() {
		c.rs, c.err = landlock.Prepare(c.landlock, c.guarded, nil)
		for _, d := range c.InRoot {
			if c.err != nil {
				break
			}
			if root < 0 {
				c.err = errors.New("no root directory for the command's own rules")
				break
			}
			c.err = c.rs.AddDeferred(root, d)
		}
	})
	return c.rs, c.err
}

func (c *creator) close() {
	if c == nil {
		return
	}
	c.once.Do(func() {})
	if c.rs != nil {
		c.rs.Close()
	}
}

// confined is a worker's performing thread.
type confined struct {
	reqs chan *createReq
	dead bool
	// shared: the thread could not unshare its filesystem attributes
	// (Docker's default seccomp profile refuses unshare), so it shares
	// the supervisor's umask, which the kernel applies on top of the
	// task's (see modeFor).
	shared bool
}

// createReq is one call to perform on the confined thread.
type createReq struct {
	cr    *creds
	umask int
	do    func() (int, unix.Errno)
	val   int
	errno unix.Errno
	err   error // the thread could not act for the task
	done  chan struct{}
}

var errConfined = errors.New("notify: confined thread unusable")

// startCreator starts a thread that unshares its filesystem attributes
// (so its umask is its own), restricts itself with rs and then performs
// requests until reqs is closed. It never unlocks its thread, which thus
// dies with the goroutine.
func startCreator(rs *landlock.Ruleset) (*confined, error) {
	c := &confined{reqs: make(chan *createReq)}
	ready := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		c.shared = unix.Unshare(unix.CLONE_FS) != nil
		tc, err := newThreadCreds()
		if err != nil {
			ready <- err
			return
		}
		if err := rs.RestrictSelf(); err != nil {
			ready <- err
			return
		}
		ready <- nil
		for r := range c.reqs {
			if err := tc.become(r.cr); err != nil {
				r.err = err
			} else {
				if !c.shared && r.umask >= 0 {
					unix.Umask(r.umask)
				}
				r.val, r.errno = r.do()
			}
			tc.restore()
			if tc.poisoned {
				r.err = errConfined
				close(r.done)
				// The worker learns it from r.err and
				// starts another thread.
				return
			}
			close(r.done)
		}
	}()
	if err := <-ready; err != nil {
		return nil, err
	}
	return c, nil
}

// perform runs do on the worker's confined thread with the task's
// credentials and umask.
//
// It reports false with the answer when the thread could not act.
func (t *task) perform(ts *taskStatus, do func() (int, unix.Errno)) (int, unix.Errno, result, bool) {
	h := t.h
	if h.s.creator == nil {
		return 0, 0, deny(unix.EACCES, "creation call sent to a supervisor without the persistence guard", ""), false
	}
	if t.needUmask && ts.umask < 0 {
		return 0, 0, deny(unix.EACCES, "cannot read the caller's umask", ""), false
	}
	if h.confined == nil || h.confined.dead {
		rs, err := h.s.creator.ruleset(t.root)
		if err != nil {
			return 0, 0, deny(unix.EACCES, "cannot prepare the confined thread: "+err.Error(), ""), false
		}
		c, err := startCreator(rs)
		if err != nil {
			return 0, 0, deny(unix.EACCES, "cannot start the confined thread: "+err.Error(), ""), false
		}
		h.confined = c
	}
	t.sharedUmask = h.confined.shared
	r := &createReq{cr: &ts.cr, umask: ts.umask, do: do, done: make(chan struct{})}
	h.confined.reqs <- r
	<-r.done
	if r.err != nil {
		if errors.Is(r.err, errConfined) {
			h.confined.dead = true
		}
		return 0, 0, deny(unix.EACCES, "cannot assume the caller's credentials: "+r.err.Error(), ""), false
	}
	return r.val, r.errno, result{}, true
}

// existing says the entry name of directory dir exists: mkdir fails then
// with EEXIST before the kernel checks any permission of the directory or
// asks Landlock (filename_create), and ts needs no umask. A name that
// does not resolve here (a trailing slash after a file) is left to the
// call itself.
func existing(dir int, name string) bool {
	var st unix.Stat_t
	return unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// takeUmask reads the task's umask into ts, which idStatus read without
// it (unless the status was read whole anyway), and gives it to the
// handler's thread where that has its own.
func (t *task) takeUmask(ts *taskStatus) unix.Errno {
	if ts.umask < 0 {
		full, ok := t.h.readStatus(t.tid, true)
		if !ok || full.umask < 0 {
			return unix.EACCES
		}
		ts.umask = full.umask
	}
	t.needUmask = true
	if t.h.ownFS && !t.sharedUmask {
		unix.Umask(ts.umask)
	}
	return 0
}

// modeFor is the creation mode to pass for the task's mode: the mode
// itself where the confined thread has the task's umask; else the mode less
// the task's umask, which the kernel then reduces by the supervisor's
// umask too, so a command whose umask is laxer than the launcher's gets
// fewer permission bits than it asked for (never more).
func (t *task) modeFor(ts *taskStatus, mode uint32) uint32 {
	if t.sharedUmask && ts.umask >= 0 {
		return mode &^ uint32(ts.umask)
	}
	return mode
}

// fast performs op on the handler's own thread, with the task's
// credentials and umask, when every parent directory (resolved here, once)
// lies where the run's Landlock rules grant every right but creating
// device nodes: inside a writable root, outside the guarded paths, and not
// one whose entries Landlock keeps fixed (policy.entryWritable). There
// Landlock allows whatever the kernel's own checks allow, so the hand-off
// to the confined thread (about 60 us a call on this machine) buys
// nothing. It reports false, having changed nothing, anywhere else; the
// caller then hands the call to the confined thread, where Landlock
// decides.
//
// lasts are the entries of each parent the call adds, removes or replaces:
// in a directory whose entries Landlock grants one by one (the core's
// guarded work tree, policy.entryWritable) the call is performed here
// unless one of them is guarded, so that entries made during the run work
// as anywhere else in the tree.
func (t *task) fast(ts *taskStatus, parents []*prepared, lasts []string, op func(pfds []int) (int, unix.Errno)) (int, unix.Errno, bool) {
	h := t.h
	if t.needUmask && ts.umask < 0 || t.inRoot {
		// In the command's own tree the supervisor's paths mean
		// nothing: every call goes to the confined thread.
		return 0, 0, false
	}
	tc := h.tc
	defer tc.restore()
	if tc.become(&ts.cr) != nil {
		return 0, 0, false
	}
	pfds := make([]int, len(parents))
	reals := make([]string, len(parents))
	for i, p := range parents {
		var fd int
		var real string
		if i > 0 && *p == *parents[0] {
			// The same walk from the same start (a rename within
			// one directory): resolved once, both sides then name
			// one directory, as one instant of the tree.
			fd, real = pfds[0], reals[0]
		} else {
			var e unix.Errno
			if fd, e = t.resolve(p, false); e != 0 {
				return 0, 0, false
			}
			var ok bool
			if real, ok = fdPath(fd); !ok {
				return 0, 0, false
			}
		}
		reals[i] = real
		if !h.s.pol.entryWritable(real, lasts[i]) {
			return 0, 0, false
		}
		if _, _, ok := h.s.pol.refusedRow(real, lasts[i]); ok {
			return 0, 0, false // the confined thread's path refuses it, naming the row
		}
		pfds[i] = fd
	}
	if !t.valid() {
		return 0, unix.EACCES, true
	}
	t.sharedUmask = !h.ownFS
	if h.ownFS && t.needUmask {
		unix.Umask(ts.umask)
	}
	v, e := op(pfds)
	return v, e, true
}

// stopConfined ends the worker's confined thread.
func (h *handler) stopConfined() {
	if h.confined != nil && !h.confined.dead {
		close(h.confined.reqs)
	}
	h.confined = nil
}

// createCall handles the calls of create.go (isCreateKind).
func (t *task) createCall(kind sysKind) result {
	args := t.n.Data.Args
	switch {
	case kind == sysSetgroups:
		return t.h.s.credChanged()
	case kind == sysUnlink || kind == sysUnlinkat || kind == sysRmdir:
		return t.removeCall(kind)
	case kind == sysOpen && args[1]&unix.O_CREAT == 0,
		kind == sysOpenat && args[2]&unix.O_CREAT == 0:
		return t.openWrite(kind)
	}
	ca, ok := createArgsOf(kind, args)
	if !ok {
		return deny(unix.EACCES, "system call not handled by the supervisor", "")
	}
	dirfd, pathAddr, targetAddr, mode, dev, flags := ca.dirfd, ca.path, ca.target, ca.mode, ca.dev, ca.flags
	var target string
	if kind == sysSymlink || kind == sysSymlinkat {
		var e unix.Errno
		if target, e = t.pathArg(targetAddr); e != 0 {
			return fail(e)
		}
	}
	path, e := t.pathArg(pathAddr)
	if e != 0 {
		return fail(e)
	}
	if why, ok := gitName(path); ok {
		return refuseGit(path, why)
	}
	// mkdir -p and the like ask for existing directories again and
	// again: the umask, which only a status read gives, is read once
	// the name is known to be new (existing, below).
	mkdir := kind == sysMkdir || kind == sysMkdirat
	status := t.status
	if mkdir {
		status = t.idStatus
	}
	ts, r, ok := status(path)
	if !ok {
		return r
	}
	if r, ok := t.enterRoot(path); !ok {
		return r
	}
	if flags >= 0 {
		return t.openCreate(&ts, dirfd, path, flags, mode)
	}
	parent, last := splitParent(t.ownProc(&ts, path))
	pp, e := t.acquireDir(&ts, dirfd, parent)
	if e != 0 {
		return fail(e)
	}
	// Landlock never grants device nodes: those go to the confined
	// thread, where it refuses them.
	if typ := mode & unix.S_IFMT; kind != sysMknod && kind != sysMknodat || typ == 0 || typ == unix.S_IFREG || typ == unix.S_IFIFO || typ == unix.S_IFSOCK {
		if _, en, ok := t.fast(&ts, []*prepared{&pp}, []string{last}, func(pfds []int) (int, unix.Errno) {
			switch kind {
			case sysMkdir, sysMkdirat:
				if existing(pfds[0], last) {
					return 0, unix.EEXIST
				}
				if e := t.takeUmask(&ts); e != 0 {
					return 0, e
				}
				return 0, errnoOf(unix.Mkdirat(pfds[0], last, t.modeFor(&ts, mode)))
			case sysSymlink, sysSymlinkat:
				if t.rowSymlink(pfds[0], last) {
					return 0, unix.EPERM
				}
				return 0, errnoOf(unix.Symlinkat(target, pfds[0], last))
			}
			return 0, errnoOf(unix.Mknodat(pfds[0], last, t.modeFor(&ts, mode), int(dev)))
		}); ok {
			return fail(en)
		}
	}
	if mkdir {
		if e := t.takeUmask(&ts); e != 0 {
			return deny(e, "cannot read the caller's umask", path)
		}
	}
	_, en, r, ok := t.perform(&ts, func() (int, unix.Errno) {
		pfd, e := t.resolve(&pp, false)
		if e != 0 {
			return 0, e
		}
		if t.rowNew(pfd, last) || (kind == sysSymlink || kind == sysSymlinkat) && t.rowSymlink(pfd, last) {
			return 0, unix.EPERM
		}
		if !t.valid() {
			return 0, unix.EACCES
		}
		switch kind {
		case sysMkdir, sysMkdirat:
			return 0, errnoOf(unix.Mkdirat(pfd, last, t.modeFor(&ts, mode)))
		case sysSymlink, sysSymlinkat:
			return 0, errnoOf(unix.Symlinkat(target, pfd, last))
		}
		return 0, errnoOf(unix.Mknodat(pfd, last, t.modeFor(&ts, mode), int(dev)))
	})
	if !ok {
		r.path = path
		return r
	}
	return fail(en)
}

// createArgs are a creating call's arguments, decoded by createArgsOf.
type createArgs struct {
	dirfd        int32
	path, target uint64 // addresses in the caller's memory
	mode         uint32
	dev          uint64
	flags        int // an open's flags; -1 for the other calls
}

// createArgsOf decodes the arguments of the creating call kind; false for
// a call createCall does not handle.
func createArgsOf(kind sysKind, args [6]uint64) (createArgs, bool) {
	a := createArgs{dirfd: unix.AT_FDCWD, flags: -1}
	switch kind {
	case sysMkdir:
		a.path, a.mode = args[0], uint32(args[1])
	case sysMkdirat:
		a.dirfd, a.path, a.mode = int32(args[0]), args[1], uint32(args[2])
	case sysSymlink:
		a.target, a.path = args[0], args[1]
	case sysSymlinkat:
		a.target, a.dirfd, a.path = args[0], int32(args[1]), args[2]
	case sysMknod:
		a.path, a.mode, a.dev = args[0], uint32(args[1]), args[2]
	case sysMknodat:
		a.dirfd, a.path, a.mode, a.dev = int32(args[0]), args[1], uint32(args[2]), args[3]
	case sysOpen:
		a.path, a.flags, a.mode = args[0], int(int32(args[1])), uint32(args[2])
	case sysOpenat:
		a.dirfd, a.path, a.flags, a.mode = int32(args[0]), args[1], int(int32(args[2])), uint32(args[3])
	case sysCreat:
		a.path, a.flags, a.mode = args[0], unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC, uint32(args[1])
	default:
		return a, false
	}
	return a, true
}

// openFlags are the flags openat2 accepts (it refuses unknown bits, which
// open and openat ignore).
const openFlags = unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOCTTY | unix.O_TRUNC |
	unix.O_APPEND | unix.O_NONBLOCK | unix.O_DSYNC | unix.O_ASYNC | unix.O_DIRECT | unix.O_LARGEFILE |
	unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_NOATIME | unix.O_CLOEXEC | unix.O_SYNC | unix.O_PATH | unix.O_TMPFILE

// maxFollow bounds the symlinks an O_CREAT open follows at its last
// component, as the kernel's MAXSYMLINKS does.
const maxFollow = 40

// openCreate performs open(path, flags, mode) with O_CREAT and installs the
// result into the task. A last component that is a symlink is followed here,
// one link at a time, so that the name finally created is checked too (the
// kernel creates a dangling symlink's target).
func (t *task) openCreate(ts *taskStatus, dirfd int32, path string, flags int, mode uint32) result {
	flags &= openFlags
	mode &= 0o7777
	if n, ok := stdFD(path); ok {
		return t.reopen(ts, n, flags)
	}
	path = t.ownProc(ts, path)
	parent, last := splitParent(path)
	pp, e := t.acquireDir(ts, dirfd, parent)
	if e != 0 {
		return fail(e)
	}
	if r, done := t.openCreateFast(ts, &pp, &last, path, flags, mode); done {
		return r
	}
	return t.openCreateConfined(ts, pp, last, path, flags, mode)
}

// openCreateFast is openCreate's common case, on the handler's thread: in
// a directory where Landlock grants everything (or, in a guarded work tree,
// where the supervisor adds the entry itself), a last component that is not
// a symlink, or one followed here hop by hop while each hop stays in such a
// directory (a dangling symlink's target is created). It returns false to
// leave the open to the confined thread, with *pp and *last at the name
// the hops reached.
func (t *task) openCreateFast(ts *taskStatus, pp *prepared, last *string, path string, flags int, mode uint32) (result, bool) {
	var link string
	var linkDir int
	open := func(pfds []int) (int, unix.Errno) {
		how := unix.OpenHow{Mode: uint64(t.modeFor(ts, mode)), Resolve: unix.RESOLVE_NO_MAGICLINKS,
			Flags: uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC)}
		fd, err := unix.Openat2(pfds[0], *last, &how)
		if err == unix.ELOOP && flags&(unix.O_NOFOLLOW|unix.O_EXCL) == 0 {
			var buf [pathMax]byte
			if n, err := unix.Readlinkat(pfds[0], *last, buf[:]); err == nil && n > 0 {
				link, linkDir = string(buf[:n]), pfds[0]
			}
		}
		return fd, errnoOf(err)
	}
	var fd int
	var en unix.Errno
	var ok bool
	for hop := 0; ; hop++ {
		link = ""
		fd, en, ok = t.fast(ts, []*prepared{pp}, []string{*last}, open)
		if !ok || en != unix.ELOOP || link == "" || hop >= maxFollow {
			break
		}
		if _, std := stdFD(link); std {
			break // the confined thread's loop reads it again
		}
		lp, ll := splitParent(t.ownProc(ts, link))
		if why, bad := gitName(ll); bad {
			return refuseGit(path+" (through a symlink)", why), true
		}
		switch {
		case strings.HasPrefix(lp, "/"):
			*pp = prepared{base: unix.AT_FDCWD, path: lp}
		case lp == "":
			*pp = prepared{base: linkDir}
		default:
			*pp = prepared{base: linkDir, path: lp}
		}
		*last = ll
	}
	switch {
	case ok && en == 0:
		return t.install(fd, flags), true
	case ok && (en != unix.ELOOP || flags&unix.O_NOFOLLOW != 0):
		return fail(en), true
	}
	return result{}, false
}

// openCreateConfined is openCreate on the confined thread, from the
// directory pp and the name last: there the run's own Landlock rules check
// the open, and a symlink at the last component is followed hop by hop.
func (t *task) openCreateConfined(ts *taskStatus, pp prepared, last, path string, flags int, mode uint32) result {
	var gitWhy string
	reopen := int32(-1)
	fd, en, r, ok := t.perform(ts, func() (int, unix.Errno) {
		how := unix.OpenHow{Mode: uint64(t.modeFor(ts, mode)), Resolve: unix.RESOLVE_NO_MAGICLINKS}
		for hop := 0; ; hop++ {
			pfd, e := t.resolve(&pp, false)
			if e != 0 {
				return -1, e
			}
			if why, ok := gitName(last); ok {
				gitWhy = why
				return -1, unix.EPERM
			}
			if t.rowNew(pfd, last) {
				return -1, unix.EPERM
			}
			if !t.valid() {
				return -1, unix.EACCES
			}
			how.Flags = uint64(flags | unix.O_NOFOLLOW | unix.O_CLOEXEC)
			fd, err := unix.Openat2(pfd, last, &how)
			if err != unix.ELOOP || flags&unix.O_NOFOLLOW != 0 {
				return fd, errnoOf(err)
			}
			// The last component is a symlink.
			if flags&unix.O_EXCL != 0 {
				return -1, unix.EEXIST
			}
			if hop >= maxFollow {
				return -1, unix.ELOOP
			}
			var buf [pathMax]byte
			n, err := unix.Readlinkat(pfd, last, buf[:])
			if err != nil {
				return -1, errnoOf(err)
			}
			link := string(buf[:n])
			if link == "" {
				return -1, unix.ENOENT
			}
			if n, ok := stdFD(link); ok {
				// /dev/stdout and the like: the task's
				// descriptor, which the caller reopens.
				reopen = n
				return -1, 0
			}
			link = t.ownProc(ts, link)
			lp, ll := splitParent(link)
			switch {
			case strings.HasPrefix(link, "/") && t.inRoot:
				pp = prepared{base: t.root, path: lp}
			case strings.HasPrefix(link, "/"):
				pp = prepared{base: unix.AT_FDCWD, path: lp}
			case lp == "":
				pp = prepared{base: pfd}
			default:
				pp = prepared{base: pfd, path: lp}
			}
			last = ll
		}
	})
	switch {
	case !ok:
		r.path = path
		return r
	case gitWhy != "":
		return refuseGit(path+" (through a symlink)", gitWhy)
	case reopen >= 0:
		return t.reopen(ts, reopen, flags)
	case en != 0:
		return fail(en)
	}
	return t.install(fd, flags)
}

// enterRoot makes the task's paths resolve in its own tree when the
// command has its own root (creator.namespaced).
func (t *task) enterRoot(path string) (result, bool) {
	c := t.h.s.creator
	if c == nil || !c.namespaced {
		return result{}, true
	}
	t.inRoot = true
	if _, e := t.rootFD(); e != 0 {
		return deny(unix.EACCES, "cannot open the caller's root directory", path), false
	}
	return result{}, true
}

// stdFD recognises the paths that name one of the caller's own
// descriptors: procSelfFD's and /dev/stdin, /dev/stdout, /dev/stderr.
func stdFD(p string) (int32, bool) {
	switch p {
	case "/dev/stdin":
		return 0, true
	case "/dev/stdout":
		return 1, true
	case "/dev/stderr":
		return 2, true
	}
	return procSelfFD(p)
}

// ownProc rewrites /proc/self and /proc/thread-self, which resolved by
// the supervisor would be its own, to the task's /proc entries.
func (t *task) ownProc(ts *taskStatus, p string) string {
	if t.inRoot {
		// The task's /proc is its own PID namespace's: walk maps
		// self and thread-self (ownProcLink).
		return p
	}
	if strings.HasPrefix(p, "/proc/self/fd/") || strings.HasPrefix(p, "/proc/thread-self/fd/") {
		// The task's descriptors: acquire takes /proc/self/fd/N
		// itself (procSelfFD).
		return p
	}
	for _, s := range []struct{ prefix, to string }{
		{"/proc/self", procPath(ts.tgid, "")},
		{"/proc/thread-self", procPath(ts.tgid, "task/"+strconv.Itoa(t.tid))},
	} {
		if rest, ok := strings.CutPrefix(p, s.prefix); ok && (rest == "" || rest[0] == '/') {
			return strings.TrimSuffix(s.to, "/") + rest
		}
	}
	return p
}

// reopen opens the task's descriptor n anew with flags (less O_CREAT and
// O_EXCL: the file exists), as open of /proc/self/fd/n does, on the
// confined thread, and installs the result.
func (t *task) reopen(ts *taskStatus, n int32, flags int) result {
	src, e := t.taskFD(ts.tgid, n)
	if e != 0 {
		return fail(e)
	}
	return t.installOpen(ts, flags, func() (int, unix.Errno) {
		if !t.valid() {
			return -1, unix.EACCES
		}
		fd, err := unix.Openat(unix.AT_FDCWD, selfFD(src), (flags&^(unix.O_CREAT|unix.O_EXCL))|unix.O_CLOEXEC, 0)
		return fd, errnoOf(err)
	})
}

// installOpen performs open on the confined thread and installs the
// descriptor it returns into the task, answering the call with its number.
func (t *task) installOpen(ts *taskStatus, flags int, open func() (int, unix.Errno)) result {
	fd, en, r, ok := t.perform(ts, open)
	if !ok {
		return r
	}
	if en != 0 {
		return fail(en)
	}
	return t.install(fd, flags)
}

// install installs our descriptor fd into the task, answering its call
// with the new number.
//
// The task's call must not return while our copy is open: the task's
// descriptor and ours are one open file, and while it is open for writing
// the kernel refuses to execute the file (ETXTBSY). A build that writes a
// binary and runs it at once (go build -o ./app && ./app, a linker under
// make) then failed now and then on a loaded machine, the supervisor's
// thread waiting to be scheduled for its close (bench/stress-guard.sh: 3
// of 100 builds). So where the task waits killable only
// (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: no signal but a fatal one ends
// its wait, so the descriptor cannot be left behind in a call that is
// restarted) the descriptor is installed without answering, ours closed,
// and the call answered after (the worker's reply). Elsewhere ADDFD_FLAG_
// SEND answers at once: an interrupted wait would otherwise leave the
// installed descriptor in the task.
func (t *task) install(fd int, flags int) result {
	add := seccompNotifAddfd{ID: t.n.ID, Srcfd: uint32(fd)}
	if flags&unix.O_CLOEXEC != 0 {
		add.NewfdFlags = unix.O_CLOEXEC
	}
	if killableWait() {
		nfd, e := addFD(t.h.s.listener, &add)
		unix.Close(fd)
		if e != 0 {
			return deny(unix.EACCES, "cannot install the descriptor: "+e.Error(), "")
		}
		return result{val: int64(nfd)}
	}
	t.keep(fd)
	add.Flags = unix.SECCOMP_ADDFD_FLAG_SEND
	nfd, e := addFD(t.h.s.listener, &add)
	if e == unix.EINVAL {
		add.Flags = 0
		nfd, e = addFD(t.h.s.listener, &add)
	}
	if e != 0 {
		return deny(unix.EACCES, "cannot install the descriptor: "+e.Error(), "")
	}
	return result{val: int64(nfd)}
}

// killableWait says the run's filters are installed with
// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (internal/seccomp uses it wherever
// the kernel knows it).
var killableWait = sync.OnceValue(func() bool {
	return seccomp.ListenerFlags()&unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV != 0
})
