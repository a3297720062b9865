//go:build linux

package notify

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// A command with its own mount namespace and root (landlock+namespaces)
// sees other mounts than the supervisor: .git bound read-only over the
// work tree, its own /proc, /dev and tmpfs directories, nothing of the
// host but the granted roots. A path it names must therefore be resolved
// in its tree, never in the supervisor's (creator.namespaced): from its
// root (/proc/<tid>/root) when absolute, from its working directory or
// descriptor when relative. Starting from those descriptors, every mount
// crossed is one of the command's. Only two things of a kernel walk would
// still be the supervisor's: an absolute symlink (which restarts at the
// walking thread's root) and ".." at the command's root (which the kernel
// stops only at the walking thread's root). So walk follows symlinks
// itself, one component at a time, restarting absolute ones at the
// command's root and keeping ".." at it: what openat2's RESOLVE_IN_ROOT
// does, for a start directory that need not be the root.

// ownTree makes the task's paths resolve in its own tree when the command
// has its own mount namespace and root (a backend other than the core): for the
// metadata calls and truncate(2), which the supervisor performs itself.
func (t *task) ownTree(path string) (result, bool) {
	if !t.h.s.pol.namespaced {
		return result{}, true
	}
	t.inRoot = true
	if _, e := t.rootFD(); e != 0 {
		return deny(unix.EACCES, "cannot open the caller's root directory", path), false
	}
	return result{}, true
}

// rootFD opens the task's root directory, once per notification.
func (t *task) rootFD() (int, unix.Errno) {
	if t.root >= 0 {
		return t.root, 0
	}
	fd, err := t.openProc("root", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return -1, unix.EACCES
	}
	t.root = t.keep(fd)
	t.readNSIDs()
	return t.root, 0
}

// objID identifies a directory: a bind mount shows the same inode on
// another mount, where ".." leads elsewhere.
type objID struct {
	dev, ino, mnt uint64
}

func idOf(fd int) (objID, unix.Errno) {
	var sx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW, unix.STATX_INO|unix.STATX_MNT_ID, &sx); err != nil {
		return objID{}, errnoOf(err)
	}
	id := objID{dev: uint64(sx.Dev_major)<<32 | uint64(sx.Dev_minor), ino: sx.Ino}
	if sx.Mask&unix.STATX_MNT_ID != 0 {
		id.mnt = sx.Mnt_id
	}
	return id, 0
}

// procSuperMagic is procfs's f_type: its symlinks are magic links
// (/proc/<pid>/fd/N, cwd, root) or name a PID of the command's PID
// namespace (/proc/self), which the supervisor cannot follow as the
// command's kernel would.
const procSuperMagic = 0x9fa0

// walk resolves path from base as the kernel resolves it for the task
// whose root is t.root, returning an O_PATH descriptor: symlinks are
// followed (the last one only with follow, or when path ends in a slash),
// absolute paths and absolute symlink targets start at the task's root,
// ".." at the task's root stays there. It runs with the task's
// credentials, so every step needs the search permission the task's own
// walk would need. A symlink on procfs is refused (EACCES): see
// procSuperMagic.
func (t *task) walk(base int, path string, follow bool) (int, unix.Errno) {
	if t.root < 0 {
		return -1, unix.EACCES
	}
	rootID, e := idOf(t.root)
	if e != 0 {
		return -1, e
	}
	if strings.HasSuffix(path, "/") {
		follow = true
	}
	if fd, e, done := t.walkDown(base, path, follow); done {
		return fd, e
	}
	// cur is closed when left if the walk opened it (own): a long path
	// must not hold a descriptor per component.
	cur, own := base, false
	move := func(fd int, opened bool) {
		if own {
			unix.Close(cur)
		}
		cur, own = fd, opened
	}
	defer func() { move(-1, false) }()
	// found hands fd over to the task's descriptors, closed with it.
	found := func(fd int) (int, unix.Errno) {
		if fd == cur {
			own = false
		}
		if fd != base && fd != t.root {
			t.keep(fd)
		}
		return fd, 0
	}
	rest := path
	if strings.HasPrefix(rest, "/") {
		move(t.root, false)
	}
	links := 0
	for {
		rest = strings.TrimLeft(rest, "/")
		if rest == "" {
			return found(cur)
		}
		comp, after, _ := strings.Cut(rest, "/")
		rest = after
		last := strings.TrimLeft(rest, "/") == ""
		if comp == "." {
			continue
		}
		if comp == ".." {
			id, e := idOf(cur)
			if e != 0 {
				return -1, e
			}
			if id == rootID {
				continue
			}
		}
		how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
			Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		fd, err := unix.Openat2(cur, comp, &how)
		if err != nil {
			return -1, errnoOf(err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return -1, errnoOf(err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			move(fd, true)
			continue
		case unix.S_IFLNK:
			if last && !follow {
				return found(fd)
			}
		default:
			if !last {
				unix.Close(fd)
				return -1, unix.ENOTDIR
			}
			return found(fd)
		}
		// A symlink to follow.
		target, e := t.followLink(cur, fd, comp, links)
		if e != 0 {
			return -1, e
		}
		links++
		if strings.HasPrefix(target, "/") {
			move(t.root, false)
		}
		if rest != "" {
			target += "/" + rest
		} else if strings.HasSuffix(path, "/") {
			target += "/"
		}
		rest = target
	}
}

// walkDown is walk's common case, in one call: without ".." and symlinks,
// the kernel's walk from the command's directory only goes down, through
// the command's mounts. It returns false when the walk must go component by
// component: a ".." in path, or a symlink on the way (ELOOP).
func (t *task) walkDown(base int, path string, follow bool) (int, unix.Errno, bool) {
	if slices.Contains(strings.Split(path, "/"), "..") {
		return -1, 0, false
	}
	start, rel := base, path
	if strings.HasPrefix(path, "/") {
		start, rel = t.root, strings.TrimLeft(path, "/")
	}
	if rel == "" {
		return start, 0, true
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if !follow {
		how.Flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat2(start, rel, &how)
	if err == nil {
		return t.keep(fd), 0, true
	}
	if err != unix.ELOOP {
		return -1, errnoOf(err), true
	}
	return -1, 0, false
}

// followLink reads the symlink fd, named comp in the directory cur, the
// walk's links+1st, and closes fd: the command's own /proc link
// (ownProcLink) or the symlink's target (readLink).
func (t *task) followLink(cur, fd int, comp string, links int) (string, unix.Errno) {
	defer unix.Close(fd)
	target, e := t.ownProcLink(cur, comp)
	if e == 0 && target == "" {
		target, e = readLink(fd, links)
	} else if e == 0 && links >= maxFollow {
		e = unix.ELOOP
	}
	return target, e
}

// readLink reads the symlink fd, the walk's links+1st: ELOOP past
// maxFollow, EACCES on procfs (procSuperMagic), ENOENT when empty.
func readLink(fd, links int) (string, unix.Errno) {
	if links >= maxFollow {
		return "", unix.ELOOP
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil || sfs.Type == procSuperMagic {
		return "", unix.EACCES
	}
	var buf [pathMax]byte
	n, err := unix.Readlinkat(fd, "", buf[:])
	if err != nil {
		return "", errnoOf(err)
	}
	if n == 0 {
		return "", unix.ENOENT
	}
	return string(buf[:n]), 0
}

// mountedOn says the entry name of directory dir (a descriptor of the
// command's tree) is a mount point there. The kernel refuses to rename a
// mount point of the calling thread's own mount namespace (EBUSY), and
// that is the supervisor's when it performs a call for the command: .git,
// bound read-only in the command's namespace, is an ordinary directory in
// the supervisor's. The lookup of the entry crosses the command's mounts
// (they hang on its tree's dentries, whatever the walking thread's
// namespace), so a mount point shows as an entry on another mount than
// dir. Where the mount cannot be told (no STATX_MNT_ID, nor fdinfo), the
// entry counts as a mount point: refusing a rename is the safe side.
func mountedOn(dir int, name string) bool {
	name = strings.TrimRight(name, "/")
	if name == "" || name == "." || name == ".." {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
	fd, err := unix.Openat2(dir, name, &how)
	if err != nil {
		return false // no such entry: nothing mounted on it
	}
	defer unix.Close(fd)
	a, okA := mountID(dir)
	b, okB := mountID(fd)
	return !okA || !okB || a != b
}

// mountBusy says a rename the supervisor performs for a task resolved in
// its own tree (t.inRoot) moves or replaces a mount point there: the old
// entry oldLast of directory odir or the new one newLast of ndir. The
// kernel refuses that (EBUSY), but checks it against the calling
// thread's mount namespace, which is the supervisor's: the rename's
// performer answers EBUSY itself, as the command's kernel would (the
// persistence guard's .git is such a mount under landlock+namespaces and
// bubblewrap).
func (t *task) mountBusy(odir int, oldLast string, ndir int, newLast string) bool {
	return t.inRoot && (mountedOn(odir, oldLast) || mountedOn(ndir, newLast))
}

// mountID is the mount fd lies on: statx's, else /proc/self/fdinfo's.
func mountID(fd int) (uint64, bool) {
	if id, e := idOf(fd); e == 0 && id.mnt != 0 {
		return id.mnt, true
	}
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "mnt_id:"); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// ownProcLink is the target of procfs's self and thread-self symlinks as
// the task reads them (its own pid namespace's numbers), when the entry
// name of directory dir is one of them on a procfs root; "" otherwise.
// Read by the supervisor, in an ancestor pid namespace, those links lead
// nowhere (walk would refuse them, EACCES, where the task's own walk goes
// on: /proc/self/missing/x is ENOENT to it).
func (t *task) ownProcLink(dir int, name string) (string, unix.Errno) {
	if name != "self" && name != "thread-self" {
		return "", 0
	}
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(dir, &sfs) != nil || sfs.Type != procSuperMagic || unix.Fstat(dir, &st) != nil || st.Ino != procRootIno {
		return "", 0
	}
	if t.nsTgid == "" || t.nsPid == "" {
		return "", unix.ENOENT
	}
	if name == "self" {
		return t.nsTgid, 0
	}
	return t.nsTgid + "/task/" + t.nsPid, 0
}

// readNSIDs reads the task's ids in its own pid namespace (the last of
// NStgid and NSpid in its status), on the handler's thread: the confined
// thread's Landlock rules may not reach /proc.
func (t *task) readNSIDs() {
	b, err := os.ReadFile(procPath(t.tid, "status"))
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		for _, f := range []struct {
			name string
			to   *string
		}{{"NStgid:", &t.nsTgid}, {"NSpid:", &t.nsPid}} {
			if v, ok := strings.CutPrefix(l, f.name); ok {
				if fs := strings.Fields(v); len(fs) > 0 {
					*f.to = fs[len(fs)-1]
				}
			}
		}
	}
}

// procRootIno is the inode number of a procfs root.
const procRootIno = 1
