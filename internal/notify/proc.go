//go:build linux

package notify

import (
	"bytes"
	"strconv"

	"golang.org/x/sys/unix"
)

const (
	pathMax      = unix.PathMax // 4096, including the terminating NUL
	xattrNameMax = 255          // XATTR_NAME_MAX
	xattrSizeMax = 65536        // XATTR_SIZE_MAX
	pageSize     = 4096         // reads never cross this boundary in one go

	// maxStatusSize bounds /proc/<tid>/status (65536 groups take ~700 KiB).
	maxStatusSize = 1 << 20
)

// procPath returns /proc/<tid>/<name>. The notification's pid is a thread id;
// /proc/<tid> exists (unlisted) for every thread and carries that thread's
// own credentials, cwd and file table.
func procPath(tid int, name string) string {
	return "/proc/" + strconv.Itoa(tid) + "/" + name
}

// memReader reads the notifying task's memory through /proc/<tid>/mem. Each
// datum is read exactly once; the supervisor then works on its private copy,
// so the task's other threads cannot change it behind the supervisor's back.
type memReader struct {
	tid int
	fd  int
}

func (m *memReader) open() unix.Errno {
	if m.fd >= 0 {
		return 0
	}
	fd, err := unix.Open(procPath(m.tid, "mem"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return unix.EACCES
	}
	m.fd = fd
	return 0
}

func (m *memReader) close() {
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}

// read fills b from address addr; any short read is EFAULT, as the kernel
// would have reported for an unreadable user pointer.
func (m *memReader) read(addr uint64, b []byte) unix.Errno {
	if len(b) == 0 {
		return 0
	}
	if addr == 0 || addr > 1<<63-1-uint64(len(b)) {
		return unix.EFAULT
	}
	if e := m.open(); e != 0 {
		return e
	}
	for len(b) > 0 {
		n, err := unix.Pread(m.fd, b, int64(addr))
		if err != nil || n <= 0 {
			return unix.EFAULT
		}
		b = b[n:]
		addr += uint64(n)
	}
	return 0
}

// readString reads a NUL-terminated string of at most limit bytes including
// the NUL. It returns tooLong when no NUL occurs within limit bytes. Reads stop
// at page boundaries so that a string ending just before an unmapped page is
// still read completely.
func (m *memReader) readString(addr uint64, limit int, tooLong unix.Errno) (string, unix.Errno) {
	if addr == 0 || addr > 1<<63-1-uint64(limit) {
		return "", unix.EFAULT
	}
	if e := m.open(); e != 0 {
		return "", e
	}
	var chunk [pageSize]byte
	var out []byte
	for len(out) < limit {
		n := pageSize - int(addr%pageSize)
		if n > limit-len(out) {
			n = limit - len(out)
		}
		got, err := unix.Pread(m.fd, chunk[:n], int64(addr))
		if err != nil || got <= 0 {
			return "", unix.EFAULT
		}
		if i := bytes.IndexByte(chunk[:got], 0); i >= 0 {
			out = append(out, chunk[:i]...)
			return string(out), 0
		}
		out = append(out, chunk[:got]...)
		addr += uint64(got)
	}
	return "", tooLong
}

// taskStatus is what the supervisor needs from /proc/<tid>/status.
type taskStatus struct {
	tgid int
	cr   creds
	// umask is the task's file creation mask (-1: not reported).
	umask int
}

// readStatus parses /proc/<tid>/status. The file is read afresh for every
// notification: caching by pid would go stale when the task changes its ids or
// the pid is reused. *buf is reused between calls and grown when a task has
// very many supplementary groups.
func readStatus(tid int, buf *[]byte) (taskStatus, bool) {
	st := taskStatus{umask: -1}
	fd, err := unix.Open(procPath(tid, "status"), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return st, false
	}
	defer unix.Close(fd)
	b, n := *buf, 0
	for {
		if n == len(b) {
			if len(b) >= maxStatusSize {
				return st, false
			}
			b = append(b, make([]byte, len(b))...)
			*buf = b
		}
		m, err := unix.Read(fd, b[n:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return st, false
		}
		if m == 0 {
			break
		}
		n += m
	}
	var haveUID, haveGID, haveGroups bool
	for line := range bytes.SplitSeq(b[:n], []byte{'\n'}) {
		key, val, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		// Split only the lines used (fields): this runs per notification.
		switch string(key) {
		case "Tgid":
			if f := bytes.Fields(val); len(f) == 1 {
				st.tgid, _ = strconv.Atoi(string(f[0]))
			}
		case "Umask":
			if f := bytes.Fields(val); len(f) == 1 {
				if v, err := strconv.ParseUint(string(f[0]), 8, 32); err == nil && v <= 0o777 {
					st.umask = int(v)
				}
			}
		case "Uid":
			ids, ok := parseIDs(bytes.Fields(val))
			if !ok || len(ids) != 4 {
				return st, false
			}
			st.cr.euid, st.cr.fsuid = ids[1], ids[3]
			haveUID = true
		case "Gid":
			ids, ok := parseIDs(bytes.Fields(val))
			if !ok || len(ids) != 4 {
				return st, false
			}
			st.cr.egid, st.cr.fsgid = ids[1], ids[3]
			haveGID = true
		case "Groups":
			ids, ok := parseIDs(bytes.Fields(val))
			if !ok {
				return st, false
			}
			st.cr.groups = ids
			haveGroups = true
		}
	}
	return st, haveUID && haveGID && haveGroups && st.tgid > 0
}

func parseIDs(f [][]byte) ([]uint32, bool) {
	ids := make([]uint32, 0, len(f))
	for _, s := range f {
		v, err := strconv.ParseUint(string(s), 10, 32)
		if err != nil {
			return nil, false
		}
		ids = append(ids, uint32(v))
	}
	return ids, true
}

// fdPath returns the path the kernel reports for our descriptor fd, i.e.
// d_path() of the object it refers to. Objects without a path name (sockets,
// pipes, anonymous inodes) yield strings that do not start with '/'.
func fdPath(fd int) (string, bool) {
	return readlink("/proc/self/fd/" + strconv.Itoa(fd))
}

func readlink(p string) (string, bool) {
	var buf [pathMax + 64]byte
	n, err := unix.Readlink(p, buf[:])
	if err != nil || n <= 0 || n >= len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}
