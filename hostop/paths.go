//go:build linux

// Package hostop is Tier 1: structured operations on the host (read, write,
// patch, search, list, and git through hostop/git) that execute nothing
// arbitrary. Every path is a ConfinedReadPath or ConfinedWritePath, which
// can only be made from a Root and a relative path, and which the kernel
// resolves beneath the root in the same system call that uses it
// (openat2 with RESOLVE_BENEATH), so there is no check-then-use race.
//
// What each refuses, with its own sentinel error: an absolute path
// (ErrAbsolute), a ".." component (ErrDotDot), a symlink at any component
// that leads out of the root (ErrSymlinkEscape), a device, fifo, socket or
// directory where a file is wanted (ErrSpecial), and a file with more than
// one hard link (ErrMultiLinked: the other name may be outside the root).
// Writes also refuse a symlink at any component, even one that stays in
// the root (ErrSymlink), never follow a final symlink, and replace the
// file atomically (a temporary file in the same directory, then rename).
//
// Writes are also held to the persistence guard (guard.go,
// internal/guardset): git metadata at any depth is refused
// (guardset.ErrProtected) unless the profile waives no-git-persistence,
// and editor and shell files are reported.
package hostop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/guardset"
)

// Sentinel errors; every error of this package that concerns a path wraps
// one of them (or an fs error such as fs.ErrNotExist), so errors.Is tells
// them apart.
var (
	// ErrAbsolute: the path is absolute; confined paths are relative to
	// their root.
	ErrAbsolute = errors.New("absolute path")
	// ErrDotDot: the path has a ".." component. Every one is refused, not
	// only those that climb above the root lexically: "link/../x" means a
	// different file to the kernel than to a lexical check.
	ErrDotDot = errors.New(`path has a ".." component`)
	// ErrInvalidPath: empty, NUL byte, or otherwise unusable.
	ErrInvalidPath = errors.New("invalid path")
	// ErrSymlinkEscape: a symlink on the way leads out of the root.
	ErrSymlinkEscape = errors.New("symlink leads out of the root")
	// ErrSymlink: a write (or patch) would go through a symlink, even one
	// that stays inside the root.
	ErrSymlink = errors.New("write through a symlink")
	// ErrSpecial: not a regular file (device, fifo, socket, directory).
	ErrSpecial = errors.New("not a regular file")
	// ErrMultiLinked: the file has more than one hard link; another of its
	// names may lie outside the root.
	ErrMultiLinked = errors.New("file has more than one hard link")
	// ErrTooLarge: the data or the file exceeds the operation's bound.
	ErrTooLarge = errors.New("too large")
	// ErrPatch: a patch that does not parse or does not apply.
	ErrPatch = errors.New("patch does not apply")
	// ErrUnsupported: the kernel lacks openat2 (Linux < 5.6).
	ErrUnsupported = errors.New("kernel lacks openat2 (Linux 5.6)")
)

// Root is an open directory every confined path is resolved beneath. It
// holds an O_PATH descriptor: renaming or replacing the directory's path
// afterwards does not move the root.
type Root struct {
	path string
	fd   int
	// guard is the persistence guard's policy for writes beneath the root
	// (guard.go); the zero value refuses the git set.
	guard guardset.Policy
}

// OpenRoot opens dir, which must be an absolute, normalised path of an
// existing directory (symlinks on the way to it are the caller's choice and
// are followed).
func OpenRoot(dir string) (*Root, error) {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || strings.IndexByte(dir, 0) >= 0 {
		return nil, fmt.Errorf("root %q: %w: want an absolute, normalised path", dir, ErrInvalidPath)
	}
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open root", Path: dir, Err: err}
	}
	return &Root{path: dir, fd: fd}, nil
}

// Path is the root's absolute path, as given to OpenRoot.
func (r *Root) Path() string { return r.path }

// Close releases the root's descriptor.
func (r *Root) Close() error {
	if r.fd < 0 {
		return nil
	}
	err := unix.Close(r.fd)
	r.fd = -1
	return err
}

// ConfinedReadPath is a path beneath a Root that an operation may read.
// Only Root.ReadPath makes one; the zero value is unusable.
type ConfinedReadPath struct {
	root *Root
	rel  string
}

// ConfinedWritePath is a path beneath a Root that an operation may write.
// Only Root.WritePath makes one; the zero value is unusable.
type ConfinedWritePath struct {
	root *Root
	rel  string
	// trusted: made by GitWritePath, for git's own metadata; the
	// persistence guard does not apply.
	trusted bool
}

// Rel is the path relative to its root, slash-separated ("." for the root).
func (p ConfinedReadPath) Rel() string { return p.rel }

// Rel is the path relative to its root, slash-separated.
func (p ConfinedWritePath) Rel() string { return p.rel }

// ReadPath checks rel lexically and returns it as a ConfinedReadPath; ""
// and "." name the root itself. The kernel checks the rest when it is used.
func (r *Root) ReadPath(rel string) (ConfinedReadPath, error) {
	c, err := checkRel(rel, true)
	if err != nil {
		return ConfinedReadPath{}, err
	}
	return ConfinedReadPath{root: r, rel: c}, nil
}

// WritePath checks rel lexically and returns it as a ConfinedWritePath; it
// must name an entry below the root, not the root.
func (r *Root) WritePath(rel string) (ConfinedWritePath, error) {
	c, err := checkRel(rel, false)
	if err != nil {
		return ConfinedWritePath{}, err
	}
	return ConfinedWritePath{root: r, rel: c}, nil
}

func checkRel(rel string, rootOK bool) (string, error) {
	switch {
	case strings.IndexByte(rel, 0) >= 0:
		return "", fmt.Errorf("%q: %w: NUL byte", rel, ErrInvalidPath)
	case filepath.IsAbs(rel):
		return "", fmt.Errorf("%q: %w", rel, ErrAbsolute)
	}
	for _, c := range strings.Split(rel, "/") {
		if c == ".." {
			return "", fmt.Errorf("%q: %w", rel, ErrDotDot)
		}
	}
	c := filepath.Clean(rel)
	if c == "." && !rootOK {
		return "", fmt.Errorf("%q: %w: names the root itself", rel, ErrInvalidPath)
	}
	return c, nil
}

const resolveBase = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS

// openat2 resolves rel beneath dirfd in one system call. noSymlinks refuses
// a symlink at any component (writes). Errors name the path and wrap the
// package's sentinels.
func openat2(dirfd int, show, rel string, flags uint64, noSymlinks bool) (int, error) {
	res := uint64(resolveBase)
	if noSymlinks {
		res |= unix.RESOLVE_NO_SYMLINKS
	}
	how := unix.OpenHow{Flags: flags | unix.O_CLOEXEC, Resolve: res}
	for range 8 {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN:
			// EAGAIN: a concurrent rename on the way; the kernel asks
			// for a retry rather than risk a wrong answer.
			continue
		}
		return -1, classify(dirfd, show, rel, flags, noSymlinks, err)
	}
	return -1, &fs.PathError{Op: "open", Path: show, Err: unix.EAGAIN}
}

func classify(dirfd int, show, rel string, flags uint64, noSymlinks bool, err error) error {
	switch err {
	case unix.ENOSYS:
		return fmt.Errorf("%s: %w", show, ErrUnsupported)
	case unix.EXDEV:
		// No ".." reaches here, so only a symlink (or a mount point
		// crossing by one) can have left the root.
		return fmt.Errorf("%s: %w", show, ErrSymlinkEscape)
	case unix.ELOOP:
		if noSymlinks {
			// Tell "a symlink leaving the root" from "a symlink".
			how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveBase}
			if fd, e2 := unix.Openat2(dirfd, rel, &how); e2 == unix.EXDEV {
				return fmt.Errorf("%s: %w", show, ErrSymlinkEscape)
			} else if e2 == nil {
				unix.Close(fd)
			}
			return fmt.Errorf("%s: %w", show, ErrSymlink)
		}
		if flags&unix.O_NOFOLLOW != 0 {
			return fmt.Errorf("%s: %w", show, ErrSymlink)
		}
	case unix.ENOTDIR:
		if flags&unix.O_DIRECTORY != 0 {
			return &fs.PathError{Op: "open", Path: show, Err: fmt.Errorf("%w: not a directory", ErrSpecial)}
		}
	}
	return &fs.PathError{Op: "open", Path: show, Err: err}
}

// fileInfo is what the package needs from fstat.
type fileInfo struct {
	mode  uint32
	nlink uint64
	size  int64
	dev   uint64
	ino   uint64
	uid   int
	gid   int
}

func infoOf(st *unix.Stat_t) fileInfo {
	return fileInfo{mode: st.Mode, nlink: uint64(st.Nlink), size: st.Size, dev: st.Dev, ino: st.Ino, uid: int(st.Uid), gid: int(st.Gid)}
}

func fstat(fd int) (fileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fileInfo{}, err
	}
	return infoOf(&st), nil
}

// checkRegular refuses what is not a single-linked regular file.
func checkRegular(show string, fi fileInfo) error {
	switch fi.mode & unix.S_IFMT {
	case unix.S_IFREG:
	case unix.S_IFLNK:
		return fmt.Errorf("%s: %w", show, ErrSymlink)
	case unix.S_IFDIR:
		return fmt.Errorf("%s: %w: a directory", show, ErrSpecial)
	default:
		return fmt.Errorf("%s: %w: %s", show, ErrSpecial, typeName(fi.mode))
	}
	if fi.nlink > 1 {
		return fmt.Errorf("%s: %w (%d links)", show, ErrMultiLinked, fi.nlink)
	}
	return nil
}

func typeName(mode uint32) string {
	switch mode & unix.S_IFMT {
	case unix.S_IFREG:
		return "file"
	case unix.S_IFDIR:
		return "dir"
	case unix.S_IFLNK:
		return "symlink"
	case unix.S_IFIFO:
		return "fifo"
	case unix.S_IFSOCK:
		return "socket"
	case unix.S_IFCHR:
		return "char-device"
	case unix.S_IFBLK:
		return "block-device"
	}
	return "unknown"
}

// reopen turns an O_PATH descriptor of a regular file checked by fstat
// into a readable one for the same inode, without a second path lookup:
// opening a path could hit a fifo (blocks) or a device (the driver's open
// runs) swapped in meanwhile; the O_PATH descriptor cannot change.
func reopen(pathfd int, show string) (*os.File, error) {
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(pathfd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "reopen", Path: show, Err: err}
	}
	return os.NewFile(uintptr(fd), show), nil
}

// openRegularAt opens name in dirfd (one component or a path, resolved
// beneath dirfd) for reading and checks it is a single-linked regular
// file. follow follows a final symlink that stays beneath dirfd.
func openRegularAt(dirfd int, show, rel string, noSymlinks, follow bool) (*os.File, fileInfo, error) {
	flags := uint64(unix.O_PATH)
	if !follow {
		flags |= unix.O_NOFOLLOW
	}
	pfd, err := openat2(dirfd, show, rel, flags, noSymlinks)
	if err != nil {
		return nil, fileInfo{}, err
	}
	defer unix.Close(pfd)
	fi, err := fstat(pfd)
	if err != nil {
		return nil, fileInfo{}, &fs.PathError{Op: "stat", Path: show, Err: err}
	}
	if err := checkRegular(show, fi); err != nil {
		return nil, fi, err
	}
	f, err := reopen(pfd, show)
	return f, fi, err
}
