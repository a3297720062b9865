//go:build linux

package notify

import (
	"bytes"
	"strconv"
	"sync"
	"sync/atomic"

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

// memReader reads the notifying task's memory (pread: process_vm_readv, or
// /proc/<tid>/mem where that is refused). Each
// datum is read exactly once; the supervisor then works on its private copy,
// so the task's other threads cannot change it behind the supervisor's back.
type memReader struct {
	tid  int
	fd   int
	noVM bool // process_vm_readv refused: read the file
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

// pread reads from the task's memory at addr: with process_vm_readv (one
// call, no descriptor; it reads what the task's own user copies could read,
// no FOLL_FORCE) where the kernel lets us, else through /proc/<tid>/mem. A
// failure of process_vm_readv other than EFAULT (ENOSYS, EPERM under a
// container's seccomp profile, ESRCH) sends this and every later read of
// the notification to the file.
func (m *memReader) pread(b []byte, addr uint64) (int, unix.Errno) {
	if m.fd < 0 && !m.noVM {
		local := []unix.Iovec{{Base: &b[0]}}
		local[0].SetLen(len(b))
		remote := []unix.RemoteIovec{{Base: uintptr(addr), Len: len(b)}}
		n, err := unix.ProcessVMReadv(m.tid, local, remote, 0)
		switch {
		case err == nil && n > 0:
			return n, 0
		case err == nil || err == unix.EFAULT:
			return 0, unix.EFAULT
		}
		m.noVM = true
	}
	if e := m.open(); e != 0 {
		return 0, e
	}
	n, err := unix.Pread(m.fd, b, int64(addr))
	if err != nil || n <= 0 {
		return 0, unix.EFAULT
	}
	return n, 0
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
	for len(b) > 0 {
		n, e := m.pread(b, addr)
		if e != 0 {
			return e
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
	var chunk [pageSize]byte
	var out []byte
	for len(out) < limit {
		n := pageSize - int(addr%pageSize)
		if n > limit-len(out) {
			n = limit - len(out)
		}
		got, e := m.pread(chunk[:n], addr)
		if e != 0 {
			return "", e
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

// taskProcFiles are descriptors of one thread's /proc/<tid> directory (O_PATH)
// and of its status file, kept by a handler across notifications. A /proc
// descriptor is bound to the thread (its struct pid), not to the number: once
// the thread is gone, reads through it fail (ESRCH) even when the number has
// been given to another thread, so a read that succeeds is the current
// thread's. The content is generated afresh by each read, so nothing the
// task may change is cached: only the open is saved (an open, a close and
// a path walk through /proc per notification).
//
// Under the persistence guard (server.creator) a call that creates no
// entry (a removal, a rename, an open for writing, truncate: most of the
// calls the guard sends) needs of the status only the ids and groups,
// never the umask. The handler then keeps the groups, which no confined
// task can change (setgroups needs CAP_SETGID, which it never holds; the
// filter sends setgroups all the same, and every kept status is dropped
// then: credChanged), and reads the ids afresh through a pidfd of the
// thread (PIDFD_GET_INFO, Linux 6.13): the kernel copies eight numbers
// where status formats some fifty lines, signal and memory masks included,
// which was the largest part of a trapped call in the supervisor. See
// keptStatus.
type taskProcFiles struct {
	dir, status int
	// pidfd is a pidfd of the thread (PIDFD_THREAD), opened after dir:
	// -1 where there is none.
	pidfd int
	// kept is the status as read at generation gen of the server's
	// credential changes (0: nothing kept).
	kept taskStatus
	gen  uint64
	// root: 0 not compared yet, 1 the supervisor's root, -1 another
	// (a task's root never changes: chroot, pivot_root, unshare and
	// setns are refused by every filter confine installs, and the
	// descriptor is the thread's).
	root int8
}

// maxTaskFiles bounds the cache (three descriptors an entry); when full it
// is emptied. Small: a server process holds a supervisor per run, each with
// up to `workers` handlers (at most 4 x 16 x 3 = 192 descriptors a run),
// and what the cache saves comes from a thread making call after call.
const maxTaskFiles = 16

// taskFiles returns tid's cached descriptors, opening them when absent;
// fresh says they were opened now.
func (h *handler) taskFiles(tid int) (f *taskProcFiles, fresh, ok bool) {
	if f, ok := h.procFiles[tid]; ok {
		return f, false, true
	}
	dir, err := unix.Open("/proc/"+strconv.Itoa(tid), unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, true, false
	}
	st, err := unix.Openat(dir, "status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		unix.Close(dir)
		return nil, true, false
	}
	pidfd := -1
	if h.keepStatus() {
		// Opened after dir: a read through dir that succeeds after this
		// (the status read that fills kept) proves the thread lived
		// when the number was resolved, so the pidfd is the same
		// thread's.
		if fd, err := unix.PidfdOpen(tid, unix.PIDFD_THREAD); err == nil {
			pidfd = fd
		}
	}
	if len(h.procFiles) >= maxTaskFiles {
		h.closeTaskFiles()
	}
	if h.procFiles == nil {
		h.procFiles = make(map[int]*taskProcFiles)
	}
	f = &taskProcFiles{dir: dir, status: st, pidfd: pidfd}
	h.procFiles[tid] = f
	return f, true, true
}

// dropTaskFiles closes and forgets tid's descriptors.
func (h *handler) dropTaskFiles(tid int) {
	if f, ok := h.procFiles[tid]; ok {
		unix.Close(f.status)
		unix.Close(f.dir)
		if f.pidfd >= 0 {
			unix.Close(f.pidfd)
		}
		delete(h.procFiles, tid)
	}
}

// closeTaskFiles empties the cache.
func (h *handler) closeTaskFiles() {
	for tid := range h.procFiles {
		h.dropTaskFiles(tid)
	}
}

// keepStatus says the handler may keep a task's groups between its calls:
// the filter sends setgroups to the supervisor (plan.Seccomp.NotifyCreate,
// which every run with Config.Create has) and the kernel reports a
// thread's ids through its pidfd.
func (h *handler) keepStatus() bool {
	return h.s != nil && h.s.creator != nil && !noPidfdInfo.Load()
}

// noPidfdInfo: the kernel has no PIDFD_GET_INFO (before 6.13); status is
// read for every call.
var noPidfdInfo atomic.Bool

// credChanged answers setgroups (sysSetgroups): what the handlers keep of
// any task's status is stale from now on, and the kernel performs the
// call (and refuses it: no confined task holds CAP_SETGID). A call
// handled meanwhile on another worker with the old groups was received
// before this one was resumed, as if the kernel had run it first.
func (s *server) credChanged() result {
	s.credGen.Add(1)
	return result{cont: true}
}

// readStatus reads and parses /proc/<tid>/status, afresh for every
// notification: the task may change its ids or umask at any time
// (setresuid among its real, effective and saved ids needs no privilege),
// so nothing read is kept but the groups for keptStatus, which umask
// false (the call creates nothing) lets it use; the status it returns
// then has no umask (-1). The descriptor is cached (taskFiles); a
// descriptor whose thread is gone is replaced once by a fresh open of
// the number.
func (h *handler) readStatus(tid int, umask bool) (taskStatus, bool) {
	for {
		f, fresh, ok := h.taskFiles(tid)
		if !ok {
			return taskStatus{umask: -1}, false
		}
		st, kept, gone := h.keptStatus(f, umask)
		if kept {
			return st, true
		}
		if !gone {
			var gen uint64
			if h.keepStatus() {
				// Read before the status: a change after this
				// moves the generation past what is kept below.
				gen = h.s.credGen.Load()
			}
			if b, ok := preadAll(f.status, &h.status); ok {
				st, ok := parseStatus(b)
				if ok && gen != 0 && f.pidfd >= 0 {
					f.kept, f.gen = st, gen
				}
				return st, ok
			}
		}
		h.dropTaskFiles(tid)
		if fresh {
			return taskStatus{umask: -1}, false
		}
	}
}

// keptStatus is the thread's status from the groups f keeps and its ids
// read now through its pidfd, when the call needs no umask and nothing
// has changed the groups since they were read (kept); gone says the
// thread has ended.
func (h *handler) keptStatus(f *taskProcFiles, umask bool) (st taskStatus, kept, gone bool) {
	if umask || f.gen == 0 || f.pidfd < 0 || !h.keepStatus() || f.gen != h.s.credGen.Load() {
		return st, false, false
	}
	info := unix.PidfdInfo{Mask: unix.PIDFD_INFO_CREDS}
	switch err := unix.IoctlPidfdInfo(f.pidfd, &info); {
	case err == unix.ESRCH:
		return st, false, true
	case err != nil || info.Mask&unix.PIDFD_INFO_CREDS == 0:
		// ENOTTY or EINVAL before Linux 6.13.
		noPidfdInfo.Store(true)
		f.gen = 0
		return st, false, false
	}
	st = taskStatus{tgid: int(info.Tgid), umask: -1, cr: creds{
		euid: info.Euid, fsuid: info.Fsuid, egid: info.Egid, fsgid: info.Fsgid, groups: f.kept.cr.groups}}
	return st, st.tgid > 0, false
}

// preadAll reads the whole of fd from offset 0 (a seq_file read at offset 0
// generates the content anew) into *buf, grown when too small.
func preadAll(fd int, buf *[]byte) ([]byte, bool) {
	b, n := *buf, 0
	for {
		if n == len(b) {
			if len(b) >= maxStatusSize {
				return nil, false
			}
			b = append(b, make([]byte, len(b))...)
			*buf = b
		}
		m, err := unix.Pread(fd, b[n:], int64(n))
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			return b[:n], true
		}
		n += m
	}
}

// parseStatus parses the content of /proc/<tid>/status.
func parseStatus(b []byte) (taskStatus, bool) {
	st := taskStatus{umask: -1}
	var haveUID, haveGID, haveGroups bool
	for line := range bytes.SplitSeq(b, []byte{'\n'}) {
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
	if dir := selfFDDir(); dir >= 0 {
		return readlinkAt(dir, strconv.Itoa(fd))
	}
	return readlink("/proc/self/fd/" + strconv.Itoa(fd))
}

// selfFDDir is an O_PATH descriptor of this process's /proc/self/fd (-1
// where it cannot be opened), opened once: fdPath runs a few times per
// notification, and the walk through /proc/self to the directory cost as
// much as the readlink. The descriptor table is the process's (the
// supervisor's threads unshare their filesystem attributes only).
var selfFDDir = sync.OnceValue(func() int {
	fd, err := unix.Open("/proc/self/fd", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1
	}
	return fd
})

func readlink(p string) (string, bool) {
	return readlinkAt(unix.AT_FDCWD, p)
}

// readlinkAt reads the symlink p relative to the directory dirfd.
func readlinkAt(dirfd int, p string) (string, bool) {
	var buf [pathMax + 64]byte
	n, err := unix.Readlinkat(dirfd, p, buf[:])
	if err != nil || n <= 0 || n >= len(buf) {
		return "", false
	}
	return string(buf[:n]), true
}
