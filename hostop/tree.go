//go:build linux

package hostop

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// MaxTreeEntries bounds what CheckTree walks.
const MaxTreeEntries = 1 << 20

// CheckTree walks the tree at p without following anything and checks
// that every symlink in it resolves beneath the root (or nowhere: a
// dangling link inside the root reads nothing), walking on into every
// directory such a symlink reaches. It returns an error wrapping
// ErrSymlinkEscape naming the first symlink that leads out, and
// ErrTooLarge beyond MaxTreeEntries entries. hostop/git checks .git with
// it before git reads anything there. Each symlink is resolved by the
// kernel beneath the root (openat2, RESOLVE_BENEATH), as reads are.
func CheckTree(p ConfinedReadPath) error {
	if p.root == nil {
		return fmt.Errorf("%w: zero ConfinedReadPath", ErrInvalidPath)
	}
	real, err := fdPath(p.root.fd)
	if err != nil {
		return err
	}
	w := &treeWalk{root: p.root, real: real, seen: map[[2]uint64]bool{}}
	fd, err := openat2(p.root.fd, p.rel, p.rel, unix.O_RDONLY|unix.O_DIRECTORY, true)
	if err != nil {
		return err
	}
	return w.dir(fd, p.rel)
}

type treeWalk struct {
	root    *Root
	real    string // the root's path as the kernel gives it
	seen    map[[2]uint64]bool
	entries int
}

// dir walks the directory fd (show: its path from the root) and closes it.
func (w *treeWalk) dir(fd int, show string) error {
	d := os.NewFile(uintptr(fd), show)
	defer d.Close()
	fi, err := fstat(fd)
	if err != nil {
		return &fs.PathError{Op: "stat", Path: show, Err: err}
	}
	if w.seen[[2]uint64{fi.dev, fi.ino}] {
		return nil
	}
	w.seen[[2]uint64{fi.dev, fi.ino}] = true
	ents, err := d.ReadDir(-1)
	if err != nil {
		return &fs.PathError{Op: "readdir", Path: show, Err: err}
	}
	for _, e := range ents {
		if w.entries++; w.entries > MaxTreeEntries {
			return fmt.Errorf("%s: %w: more than %d entries", show, ErrTooLarge, MaxTreeEntries)
		}
		rel := filepath.Join(show, e.Name())
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			if err := w.link(rel); err != nil {
				return err
			}
		case e.IsDir():
			sub, err := openat2(fd, rel, e.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, true)
			if err != nil {
				return err
			}
			if err := w.dir(sub, rel); err != nil {
				return err
			}
		}
	}
	return nil
}

// link checks the symlink at rel (from the root) and walks the directory
// it reaches.
func (w *treeWalk) link(rel string) error {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: resolveBase}
	fd, err := unix.Openat2(w.root.fd, rel, &how)
	for range 8 {
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
		fd, err = unix.Openat2(w.root.fd, rel, &how)
	}
	switch err {
	case nil:
	case unix.ENOENT, unix.ENOTDIR:
		return nil // dangling: nothing to read through it
	case unix.EXDEV, unix.ELOOP:
		// Out of the root (EXDEV), or a chain too long to tell (ELOOP):
		// either way git must not follow it.
		return fmt.Errorf("%s: %w", rel, ErrSymlinkEscape)
	default:
		return &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer unix.Close(fd)
	fi, err := fstat(fd)
	if err != nil || fi.mode&unix.S_IFMT != unix.S_IFDIR {
		return nil
	}
	// A directory inside the root: walk it under its own path.
	p, err := fdPath(fd)
	if err != nil {
		return err
	}
	inside, ok := strings.CutPrefix(p, w.real+"/")
	if !ok {
		if p != w.real {
			return fmt.Errorf("%s: %w", rel, ErrSymlinkEscape)
		}
		inside = "."
	}
	dfd, err := openat2(w.root.fd, inside, inside, unix.O_RDONLY|unix.O_DIRECTORY, true)
	if err != nil {
		return err
	}
	return w.dir(dfd, inside)
}

// fdPath is the path the kernel gives a descriptor.
func fdPath(fd int) (string, error) {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		return "", &fs.PathError{Op: "readlink", Path: "/proc/self/fd", Err: err}
	}
	return p, nil
}
