//go:build unix

package eventlog

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Defaults for Open when the configuration sets nothing.
const (
	// DefaultMaxBytes is the size at which the log is rotated.
	DefaultMaxBytes int64 = 16 << 20
	// DefaultKeep is how many rotated files are kept.
	DefaultKeep = 3
)

// maxAttempts bounds how often Record chases a file that other processes
// keep rotating away; reaching it means something other than confine is
// replacing the file.
const maxAttempts = 1000

// Log appends events to one file shared by every confine process of the
// user. A Log is safe for concurrent use; concurrent processes are
// serialised by an exclusive flock on the current file, under which each
// line is written with one O_APPEND write and rotation is done.
type Log struct {
	path     string
	maxBytes int64
	keep     int

	mu sync.Mutex // serialises Record: a flock is per open file, not per goroutine
	f  *os.File   // nil after Close
}

// DefaultPath returns $XDG_STATE_HOME/confine/events.jsonl, or
// HOME/.local/state/confine/events.jsonl when XDG_STATE_HOME is unset or not
// absolute (as the XDG base directory specification requires), where HOME
// is $HOME or, when that is unset or not absolute (systemd units, some CI
// runners), the home directory the user database gives the effective uid.
// It fails, wrapping ErrNoDefaultPath, only when none of these is known.
func DefaultPath() (string, error) {
	return defaultPath(os.Getenv, passwdHome)
}

// ErrNoDefaultPath: no state directory or home directory is known, so the
// event log has no default location.
var ErrNoDefaultPath = errors.New("event log path: no $XDG_STATE_HOME, $HOME or home directory in the user database")

func defaultPath(getenv func(string) string, dbHome func() (string, error)) (string, error) {
	if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "confine", "events.jsonl"), nil
	}
	home := getenv("HOME")
	if !filepath.IsAbs(home) {
		h, err := dbHome()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoDefaultPath, err)
		}
		if !filepath.IsAbs(h) {
			return "", fmt.Errorf("%w: home directory %q is not absolute", ErrNoDefaultPath, h)
		}
		home = h
	}
	return filepath.Join(filepath.Clean(home), ".local", "state", "confine", "events.jsonl"), nil
}

// passwdHome is the effective uid's home directory in the user database.
func passwdHome() (string, error) {
	u, err := user.LookupId(strconv.Itoa(os.Geteuid()))
	if err != nil {
		return "", err
	}
	return u.HomeDir, nil
}

// Open opens (creating it 0600, and missing parent directories 0700) the
// event log at path. The file is rotated when a line would take it past
// maxBytes (maxBytes <= 0: never), keeping keep rotated files path.1 (the
// newest) to path.keep; with keep 0 a full log is discarded.
func Open(path string, maxBytes int64, keep int) (*Log, error) {
	if path == "" {
		return nil, errors.New("open event log: empty path")
	}
	if keep < 0 {
		return nil, fmt.Errorf("open event log %s: keep %d is negative", path, keep)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	l := &Log{path: abs, maxBytes: maxBytes, keep: keep}
	if l.f, err = openAppend(abs); err != nil {
		return nil, err
	}
	return l, nil
}

// Path returns the absolute path of the current log file.
func (l *Log) Path() string { return l.path }

// Close closes the log; Record fails afterwards. Closing twice is harmless.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	if err != nil {
		return fmt.Errorf("close event log %s: %w", l.path, err)
	}
	return nil
}

// Record appends e as one JSON line. A zero Time becomes now and an empty
// RunID a fresh one; Time is written in UTC and nil lists as [].
//
// Under an exclusive flock on the file now at the path (re-checked after
// the lock is taken, and reopened when another process rotated it away),
// Record rotates when the line would take a non-empty file past maxBytes,
// then writes the line with a single O_APPEND write. A failed write is cut
// back off the file, so a reader never sees half a line.
func (l *Log) Record(e Event) error {
	e, err := e.normalize()
	if err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	line, err := e.line()
	if err != nil {
		return fmt.Errorf("record event: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return fmt.Errorf("record event %s: event log %s is closed", e.RunID, l.path)
	}
	for range maxAttempts {
		done, err := l.tryAppend(line)
		if err != nil {
			return fmt.Errorf("record event %s: %w", e.RunID, err)
		}
		if done {
			return nil
		}
		if err := l.reopen(); err != nil {
			return fmt.Errorf("record event %s: %w", e.RunID, err)
		}
	}
	return fmt.Errorf("record event %s: %s kept being replaced (%d attempts)", e.RunID, l.path, maxAttempts)
}

// tryAppend writes line to l.f under its lock when l.f is still the file at
// l.path and has room. It reports false when the caller must reopen the
// path and try again: the file was rotated, by another process or by this
// call.
func (l *Log) tryAppend(line []byte) (done bool, err error) {
	fd := int(l.f.Fd())
	if err := flock(fd, unix.LOCK_EX); err != nil {
		return false, fmt.Errorf("lock %s: %w", l.path, err)
	}
	defer func() {
		if uerr := flock(fd, unix.LOCK_UN); uerr != nil && err == nil {
			err = fmt.Errorf("unlock %s: %w", l.path, uerr)
		}
	}()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, fmt.Errorf("stat open %s: %w", l.path, err)
	}
	if cur, err := isAt(l.path, &st); err != nil || !cur {
		return false, err
	}
	if l.maxBytes > 0 && st.Size > 0 && st.Size+int64(len(line)) > l.maxBytes {
		return false, l.rotate()
	}
	if _, err := l.f.Write(line); err != nil {
		// Cut off whatever part of the line made it, so the next line
		// does not start mid-line.
		if terr := unix.Ftruncate(fd, st.Size); terr != nil {
			return false, fmt.Errorf("write %s: %w (and cutting back the partial line: %v)", l.path, err, terr)
		}
		return false, fmt.Errorf("write %s: %w", l.path, err)
	}
	return true, nil
}

// rotate shifts path.(keep-1) to path.keep (replacing the oldest), ...,
// path.1 to path.2, then path to path.1; with keep 0 it removes path.
// Only the run of rotated files from path.1 up to the first missing one is
// shifted, which is all of them unless someone deleted one, and then
// nothing is overwritten. It is called holding the exclusive lock on the
// file at path, which every writer and reader of the log takes on that
// file first, so no two rotations overlap and no reader sees one midway.
func (l *Log) rotate() error {
	if l.keep == 0 {
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate: %w", err)
		}
		return nil
	}
	n := 0 // path.1 .. path.n exist, n <= keep-1
	for n < l.keep-1 {
		if _, err := os.Lstat(rotated(l.path, n+1)); err != nil {
			if errors.Is(err, os.ErrNotExist) {
				break
			}
			return fmt.Errorf("rotate: %w", err)
		}
		n++
	}
	for i := n; i >= 1; i-- {
		if err := os.Rename(rotated(l.path, i), rotated(l.path, i+1)); err != nil {
			return fmt.Errorf("rotate: %w", err)
		}
	}
	if err := os.Rename(l.path, rotated(l.path, 1)); err != nil {
		return fmt.Errorf("rotate: %w", err)
	}
	return nil
}

// reopen replaces l.f with the file now at l.path, creating it if needed.
func (l *Log) reopen() error {
	f, err := openAppend(l.path)
	if err != nil {
		return err
	}
	if err := l.f.Close(); err != nil {
		_ = f.Close()
		return fmt.Errorf("close rotated %s: %w", l.path, err)
	}
	l.f = f
	return nil
}

// openAppend opens path for appending, creating it 0600, and checks it is
// a regular file (flock and rename-based rotation need one).
func openAppend(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open event log: %w", err)
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		_ = f.Close()
		if err == nil {
			err = errors.New("not a regular file")
		}
		return nil, fmt.Errorf("open event log %s: %w", path, err)
	}
	return f, nil
}

// isAt reports whether the file described by st is the one now at path.
func isAt(path string, st *unix.Stat_t) (bool, error) {
	var pst unix.Stat_t
	if err := unix.Stat(path, &pst); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return false, nil // rotated away, not yet recreated
		}
		return false, fmt.Errorf("stat %s: %w", path, err)
	}
	return pst.Dev == st.Dev && pst.Ino == st.Ino, nil
}

// flock is flock(2), retried when a signal interrupts the wait.
func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if err != unix.EINTR {
			return err
		}
	}
}

// rotated names the i-th rotated file; 0 is the current file.
func rotated(path string, i int) string {
	if i == 0 {
		return path
	}
	return path + "." + strconv.Itoa(i)
}
