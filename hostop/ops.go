//go:build linux

package hostop

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/spec"
)

// Default bounds of the operations; a zero option takes these.
const (
	// DefaultReadLimit is how much of a file Read returns: half from the
	// start, half from the end, as a run's output is kept.
	DefaultReadLimit = 1 << 20
	// DefaultWriteLimit bounds what Write and Patch write to one file.
	DefaultWriteLimit = 64 << 20
	// DefaultListLimit bounds the entries List returns.
	DefaultListLimit = 10000
)

// ReadResult is what Read returns: the file's content bounded like a run's
// output (Head, and Tail when the file exceeds the limit), its size.
type ReadResult struct {
	Path    string      `json:"path"`
	Content spec.Stream `json:"content"`
	Mode    uint32      `json:"mode"`
}

// Read returns the content of a regular, single-linked file: all of it up
// to limit bytes (<= 0: DefaultReadLimit), else the first and last
// limit/2. Symlinks inside the root are followed; one that leads out is
// refused.
func Read(p ConfinedReadPath, limit int64) (ReadResult, error) {
	if p.root == nil {
		return ReadResult{}, fmt.Errorf("%w: zero ConfinedReadPath", ErrInvalidPath)
	}
	if limit <= 0 {
		limit = DefaultReadLimit
	}
	f, fi, err := openRegularAt(p.root.fd, p.rel, p.rel, false, true)
	if err != nil {
		return ReadResult{}, err
	}
	defer f.Close()
	res := ReadResult{Path: p.rel, Mode: fi.mode & 0o7777}
	// The size is the one fstat saw on this very inode; a file that grows
	// meanwhile is read up to it, one that shrinks gives a short read.
	if fi.size <= limit {
		b, err := io.ReadAll(io.LimitReader(f, limit))
		if err != nil {
			return res, &fs.PathError{Op: "read", Path: p.rel, Err: err}
		}
		res.Content = spec.Stream{Head: b, Total: int64(len(b))}
		return res, nil
	}
	h := limit - limit/2
	head := make([]byte, h)
	n, err := f.ReadAt(head, 0)
	if err != nil && err != io.EOF {
		return res, &fs.PathError{Op: "read", Path: p.rel, Err: err}
	}
	tail := make([]byte, limit/2)
	m, err := f.ReadAt(tail, fi.size-int64(len(tail)))
	if err != nil && err != io.EOF {
		return res, &fs.PathError{Op: "read", Path: p.rel, Err: err}
	}
	res.Content = spec.Stream{Head: head[:n], Tail: tail[:m], Total: fi.size, Truncated: true}
	return res, nil
}

// WriteResult says what Write did.
type WriteResult struct {
	Path    string `json:"path"`
	Bytes   int64  `json:"bytes"`
	Created bool   `json:"created"`
	// Guard names the protected-set row (internal/guardset) of a write
	// the persistence guard reports rather than refuses: an editor or
	// shell file, or git metadata under a profile that waives
	// no-git-persistence.
	Guard string `json:"guard,omitempty"`
}

// WriteOptions tune Write. The zero value is the default.
type WriteOptions struct {
	// Limit bounds len(data); <= 0 means DefaultWriteLimit.
	Limit int64
	// Mode is the permission of a new file; 0 means 0644. An existing
	// file keeps its permission bits (set-ID bits are always dropped).
	Mode os.FileMode
	// NoCreate refuses to create a missing file.
	NoCreate bool
	// NoReplace refuses to replace an existing file.
	NoReplace bool
}

// Write replaces (or creates) the file at p with data, atomically: a new
// file in the same directory, synced, then renamed over the old name, so a
// reader sees the old or the new content, never a mix, and the rename
// replaces whatever the name is then (a symlink or a hard link swapped in
// meanwhile is replaced, never written through). Missing parent
// directories are created (0755). No component may be a symlink.
func Write(p ConfinedWritePath, data []byte, o WriteOptions) (WriteResult, error) {
	if p.root == nil {
		return WriteResult{}, fmt.Errorf("%w: zero ConfinedWritePath", ErrInvalidPath)
	}
	limit := o.Limit
	if limit <= 0 {
		limit = DefaultWriteLimit
	}
	if int64(len(data)) > limit {
		return WriteResult{}, fmt.Errorf("%s: %w: %d bytes, limit %d", p.rel, ErrTooLarge, len(data), limit)
	}
	dirfd, name, made, reported, err := p.parent(!o.NoCreate)
	if err != nil {
		return WriteResult{}, err
	}
	defer unix.Close(dirfd)
	ok := false
	defer func() {
		if !ok {
			p.root.rmdirs(made)
		}
	}()
	mode := uint32(0o644)
	if o.Mode != 0 {
		mode = uint32(o.Mode.Perm())
	}
	created := false
	own := dirOwner(dirfd)
	fi, err := lstatAt(dirfd, name)
	switch {
	case err == unix.ENOENT:
		if o.NoCreate {
			return WriteResult{}, &fs.PathError{Op: "write", Path: p.rel, Err: fs.ErrNotExist}
		}
		created = true
	case err != nil:
		return WriteResult{}, &fs.PathError{Op: "stat", Path: p.rel, Err: err}
	default:
		if err := checkRegular(p.rel, fi); err != nil {
			return WriteResult{}, err
		}
		if o.NoReplace {
			return WriteResult{}, &fs.PathError{Op: "write", Path: p.rel, Err: fs.ErrExist}
		}
		mode = fi.mode & 0o1777 // set-ID bits never carried over
		own = owner{fi.uid, fi.gid}
	}
	if err := replaceAt(dirfd, p.rel, name, data, mode, own); err != nil {
		return WriteResult{}, err
	}
	ok = true
	return WriteResult{Path: p.rel, Bytes: int64(len(data)), Created: created, Guard: reported}, nil
}

// owner is who a new file should belong to; uid < 0: whoever creates it.
type owner struct{ uid, gid int }

// dirOwner is the owner new files in dirfd get when this process runs as
// root: the directory's, so that a root caller working on a user's tree
// does not leave root-owned files in it. Otherwise, no change.
func dirOwner(dirfd int) owner {
	if os.Geteuid() != 0 {
		return owner{-1, -1}
	}
	fi, err := fstat(dirfd)
	if err != nil {
		return owner{-1, -1}
	}
	return owner{fi.uid, fi.gid}
}

// replaceAt writes data to a new temporary file in dirfd and renames it to
// name.
func replaceAt(dirfd int, show, name string, data []byte, mode uint32, own owner) error {
	tmp, f, err := createTemp(dirfd, show, name, mode)
	if err != nil {
		return err
	}
	if own.uid >= 0 && os.Geteuid() == 0 {
		if err := f.Chown(own.uid, own.gid); err != nil {
			f.Close()
			_ = unix.Unlinkat(dirfd, tmp, 0)
			return &fs.PathError{Op: "chown", Path: show, Err: err}
		}
	}
	if err := writeSync(f, data, mode); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return &fs.PathError{Op: "write", Path: show, Err: err}
	}
	if err := unix.Renameat(dirfd, tmp, dirfd, name); err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return &fs.PathError{Op: "rename", Path: show, Err: err}
	}
	return nil
}

func createTemp(dirfd int, show, name string, mode uint32) (string, *os.File, error) {
	for range 16 {
		var r [6]byte
		_, _ = rand.Read(r[:])
		tmp := "." + truncName(name) + ".confine-" + hex.EncodeToString(r[:])
		fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, mode)
		if err == unix.EEXIST {
			continue
		}
		if err != nil {
			return "", nil, &fs.PathError{Op: "create", Path: show, Err: err}
		}
		return tmp, os.NewFile(uintptr(fd), tmp), nil
	}
	return "", nil, &fs.PathError{Op: "create", Path: show, Err: unix.EEXIST}
}

// truncName keeps temporary names within NAME_MAX.
func truncName(n string) string {
	if len(n) > 200 {
		return n[:200]
	}
	return n
}

func writeSync(f *os.File, data []byte, mode uint32) error {
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return err
	}
	// The umask applied at creation; the mode asked for is exact.
	if err := f.Chmod(os.FileMode(mode & 0o777)); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

func lstatAt(dirfd int, name string) (fileInfo, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fileInfo{}, err
	}
	return infoOf(&st), nil
}

// parent opens the directory that holds p (creating missing directories
// when mkdir is set), with no symlink on the way, one component at a time
// beneath the descriptor of the one before, and returns it with p's last
// component, the directories it created (outermost first) and the
// protected-set row the write falls in when the guard reports it. The
// persistence guard (guard.go) checks every directory on the way, on the
// descriptor that is then used, before anything is created.
func (p ConfinedWritePath) parent(mkdir bool) (int, string, []string, string, error) {
	g, err := p.guardStart()
	if err != nil {
		return -1, "", nil, "", err
	}
	dir, name := filepath.Split(p.rel)
	dir = filepath.Clean(dir)
	cur, err := unix.Dup(p.root.fd)
	if err != nil {
		return -1, "", nil, "", err
	}
	done := ""
	var made []string
	fail := func(err error) (int, string, []string, string, error) {
		unix.Close(cur)
		p.root.rmdirs(made)
		return -1, "", nil, "", err
	}
	for _, c := range splitPath(dir) {
		if err := g.dir(cur, done, c); err != nil {
			return fail(err)
		}
		done = filepath.Join(done, c)
		next, err := openat2(cur, done, c, unix.O_PATH|unix.O_DIRECTORY, true)
		if mkdir && isNotExist(err) {
			e := unix.Mkdirat(cur, c, 0o755)
			if e != nil && e != unix.EEXIST {
				return fail(&fs.PathError{Op: "mkdir", Path: done, Err: e})
			}
			if e == nil {
				made = append(made, done)
			}
			next, err = openat2(cur, done, c, unix.O_PATH|unix.O_DIRECTORY, true)
		}
		if err != nil {
			return fail(err)
		}
		unix.Close(cur)
		cur = next
	}
	if err := g.dir(cur, done, name); err != nil {
		return fail(err)
	}
	return cur, name, made, g.reported, nil
}

// rmdirs removes directories an operation created (innermost first) when
// it failed. rmdir removes only an empty directory, so whatever another
// process put there meanwhile stays.
func (r *Root) rmdirs(made []string) {
	for i := len(made) - 1; i >= 0; i-- {
		d, name := filepath.Split(made[i])
		d = filepath.Clean(d)
		fd, err := openat2(r.fd, d, d, unix.O_PATH|unix.O_DIRECTORY, true)
		if err != nil {
			return
		}
		_ = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
		unix.Close(fd)
	}
}

func splitPath(p string) []string {
	var out []string
	for p != "." && p != "" {
		d, f := filepath.Split(p)
		out = append([]string{f}, out...)
		p = filepath.Clean(d)
		if d == "" {
			break
		}
	}
	return out
}

func isNotExist(err error) bool {
	if err == nil {
		return false
	}
	pe, ok := err.(*fs.PathError)
	return ok && pe.Err == unix.ENOENT
}

// Remove deletes the regular, single-linked file at p (patches that delete
// a file). A symlink is refused, never followed.
func Remove(p ConfinedWritePath) error {
	if p.root == nil {
		return fmt.Errorf("%w: zero ConfinedWritePath", ErrInvalidPath)
	}
	dirfd, name, _, _, err := p.parent(false)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	fi, err := lstatAt(dirfd, name)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: p.rel, Err: err}
	}
	if err := checkRegular(p.rel, fi); err != nil {
		return err
	}
	if err := unix.Unlinkat(dirfd, name, 0); err != nil {
		return &fs.PathError{Op: "remove", Path: p.rel, Err: err}
	}
	return nil
}

// Entry is one directory entry as List reports it. Type is "file", "dir",
// "symlink", "fifo", "socket", "char-device" or "block-device"; Target is
// a symlink's content (never followed).
type Entry struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode"`
	Target string `json:"target,omitempty"`
}

// ListResult is a directory's entries, sorted by name.
type ListResult struct {
	Path      string  `json:"path"`
	Entries   []Entry `json:"entries"`
	Truncated bool    `json:"truncated"`
}

// List returns the entries of the directory at p (at most limit; <= 0:
// DefaultListLimit), each described without following it.
func List(p ConfinedReadPath, limit int) (ListResult, error) {
	if p.root == nil {
		return ListResult{}, fmt.Errorf("%w: zero ConfinedReadPath", ErrInvalidPath)
	}
	if limit <= 0 {
		limit = DefaultListLimit
	}
	fd, err := openat2(p.root.fd, p.rel, p.rel, unix.O_RDONLY|unix.O_DIRECTORY, false)
	if err != nil {
		return ListResult{}, err
	}
	d := os.NewFile(uintptr(fd), p.rel)
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return ListResult{}, &fs.PathError{Op: "readdir", Path: p.rel, Err: err}
	}
	sort.Strings(names)
	res := ListResult{Path: p.rel, Entries: []Entry{}}
	if len(names) > limit {
		names, res.Truncated = names[:limit], true
	}
	for _, n := range names {
		fi, err := lstatAt(fd, n)
		if err != nil {
			continue // gone meanwhile
		}
		e := Entry{Name: n, Type: typeName(fi.mode), Size: fi.size, Mode: fi.mode & 0o7777}
		if fi.mode&unix.S_IFMT == unix.S_IFLNK {
			buf := make([]byte, 4096)
			if k, err := unix.Readlinkat(fd, n, buf); err == nil {
				e.Target = string(buf[:k])
			}
		}
		res.Entries = append(res.Entries, e)
	}
	return res, nil
}
