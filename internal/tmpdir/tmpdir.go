//go:build unix

// Package tmpdir makes and removes a run's private temporary directory:
// mode 0700, owned by the uid the command runs as, holding the command's
// HOME and TMPDIR. A run's own (CreateIn) is new for every run; a stable
// one (Stable) keeps its paths, and HOME's contents, across the runs of
// one work directory, one run at a time.
package tmpdir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// HomeName and TmpName are the subdirectories Create makes.
const (
	HomeName = "home"
	TmpName  = "tmp"
)

// Dir is one run's private directory.
type Dir struct {
	Root, Home, Tmp string
	// lock, for a stable Dir, holds it for this run until Remove.
	lock *os.File
	done chan error
	err  error
}

// Create is CreateIn under os.TempDir.
func Create(uid, gid int) (*Dir, error) { return CreateIn("", uid, gid) }

// CreateIn makes the directory under parent ("": os.TempDir) and, when uid >= 0, gives it
// to uid:gid. Root is returned with symlinks resolved. Root exists on
// return; Home and Tmp are made meanwhile (a directory costs a journal
// transaction on some filesystems, up to 0.3 ms seen on ext4): Wait for
// them before the command starts, and before Remove.
func CreateIn(parent string, uid, gid int) (*Dir, error) { return create(parent, uid, gid, true) }

// create is CreateIn; with async false Home and Tmp are made before it
// returns.
func create(parent string, uid, gid int, async bool) (*Dir, error) {
	root, err := os.MkdirTemp(parent, "confine-")
	if err != nil {
		return nil, fmt.Errorf("private temp dir: %w", err)
	}
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r
	}
	d := &Dir{Root: root, Home: filepath.Join(root, HomeName), Tmp: filepath.Join(root, TmpName)}
	if !async {
		if err := d.fill(uid, gid); err != nil {
			Remove(root)
			return nil, err
		}
		return d, nil
	}
	d.done = make(chan error, 1)
	go func() { d.done <- d.fill(uid, gid) }()
	return d, nil
}

func (d *Dir) fill(uid, gid int) error {
	for _, p := range []string{d.Home, d.Tmp} {
		if err := os.Mkdir(p, 0o700); err != nil {
			return fmt.Errorf("private temp dir: %w", err)
		}
	}
	if uid >= 0 {
		for _, p := range []string{d.Root, d.Home, d.Tmp} {
			if err := os.Chown(p, uid, gid); err != nil {
				return fmt.Errorf("private temp dir: %w", err)
			}
		}
	}
	return nil
}

// Wait returns once Home and Tmp exist (with their owner), or why they do
// not. It may be called more than once; a nil Dir is ready.
func (d *Dir) Wait() error {
	if d == nil {
		return nil
	}
	if d.done != nil {
		d.err = <-d.done
		d.done = nil
	}
	return d.err
}

// Remove waits for d (see Wait) and removes it: all of a run's own; of
// a stable one, Tmp only, and then lets the next run have it.
func (d *Dir) Remove() {
	if d == nil {
		return
	}
	_ = d.Wait()
	if d.lock == nil {
		Remove(d.Root)
		return
	}
	Remove(d.Tmp)
	d.lock.Close() // releases the flock
	d.lock = nil
}

// Stable reports whether d is a stable directory (see Stable).
func (d *Dir) Stable() bool { return d != nil && d.lock != nil }

// Grants are the directories of d a run is granted (read-write): a run's
// own whole, or a stable one's Home and Tmp but never Root, so that a run
// cannot replace either by a symlink a later run would follow.
func (d *Dir) Grants() []string {
	if d.Stable() {
		return []string{d.Home, d.Tmp}
	}
	return []string{d.Root}
}

// Scratch is where the launcher puts what it hands one run (a socket, a
// relay program): the run's own Root, or a stable Dir's Tmp, which Stable
// empties before every run.
func (d *Dir) Scratch() string {
	if d.Stable() {
		return d.Tmp
	}
	return d.Root
}

// Removable is what must be removed once the run is over, also by its
// init or reaper when the launcher cannot: a run's own Root; nothing for
// a stable Dir, whose Tmp the launcher empties itself (Remove) and the
// next run empties again (Stable), since a removal after the lock is
// released would race with that next run.
func (d *Dir) Removable() string {
	if d.Stable() {
		return ""
	}
	return d.Root
}

// ErrBusy says another run holds the stable directory.
var ErrBusy = errors.New("the stable private directory is in use by another run")

// lockName is the lock file in a stable Root (which no run is granted).
const lockName = ".lock"

// Stable makes root (the caller's, mode 0700, inside a directory no run
// is granted) the private directory of a run of the launcher's own uid:
// Home and Tmp keep their paths from run to run, so the tools' result
// caches that key on $HOME and $TMPDIR hit. It is one run's at a time:
// ErrBusy while another run holds it (the caller then makes a run's own
// with CreateIn). Home keeps its contents; Tmp is emptied. Either one that
// is not a directory of this uid (a run cannot replace them, not being
// granted root, but a crash or another program might) is replaced.
func Stable(root string) (*Dir, error) {
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("stable private dir: %w", err)
	}
	if err := os.Chmod(root, 0o700); err != nil {
		return nil, fmt.Errorf("stable private dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(root, lockName), os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("stable private dir: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrBusy
		}
		return nil, fmt.Errorf("stable private dir: lock: %w", err)
	}
	d := &Dir{Root: root, Home: filepath.Join(root, HomeName), Tmp: filepath.Join(root, TmpName), lock: lock}
	fail := func(err error) (*Dir, error) {
		lock.Close()
		return nil, fmt.Errorf("stable private dir: %w", err)
	}
	if !ownDir(d.Home) {
		Remove(d.Home)
		if err := os.Mkdir(d.Home, 0o700); err != nil {
			return fail(err)
		}
	}
	Remove(d.Tmp)
	if err := os.Mkdir(d.Tmp, 0o700); err != nil {
		return fail(err)
	}
	for _, p := range []string{d.Home, d.Tmp} {
		if err := os.Chmod(p, 0o700); err != nil {
			return fail(err)
		}
	}
	return d, nil
}

// ownDir says p is a directory (not a symlink) of this process's uid.
func ownDir(p string) bool {
	var st unix.Stat_t
	return unix.Lstat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid()
}

// Remove deletes dir even where the command made directories unreadable or
// unwritable to itself.
func Remove(dir string) {
	if dir == "" || os.RemoveAll(dir) == nil {
		return
	}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	_ = os.RemoveAll(dir)
}
