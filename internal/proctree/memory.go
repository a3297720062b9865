//go:build linux

package proctree

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// TreeMemory sums the memory the descendants of root (root excluded) hold
// and the kernel cannot reclaim without them: each process's resident
// anonymous and shared-memory pages and its swapped-out pages (RssAnon,
// RssShmem and VmSwap of /proc/PID/status). It returns the sum in bytes
// and how many processes it read.
//
// What it counts is RSS, not PSS: a page shared by several processes of
// the run (a MAP_SHARED mapping, a tmpfs or memfd file several map, the
// copy-on-write pages of a fork) counts once per process that maps it, so
// the sum may exceed what the run really holds, never fall below it.
// File-backed pages (executables, libraries, files mapped from disk) are
// page cache, reclaimable, and not counted: counting them would charge
// every process of a build for the same libc. Memory-backed files (tmpfs,
// memfd, hugetlbfs) a process holds open are counted whole, once each,
// whether mapped or not (shmemFiles); one that no process holds open (a
// file written to a tmpfs and closed) is not counted.
func TreeMemory(root int) (bytes int64, procs int, err error) {
	members, ok := childrenTree(root)
	if !ok {
		if _, members, err = tree(root); err != nil {
			return 0, 0, err
		}
	}
	buf := make([]byte, 4096)
	files := shmemFiles{seen: map[[2]uint64]bool{}, shmem: map[uint64]bool{}}
	for _, pid := range members {
		bytes += residentBytes(pid, buf) + files.held(pid)
	}
	return bytes, len(members), nil
}

// shmemFiles adds up the memory-backed files (tmpfs, memfd, hugetlbfs)
// the tree holds open, each once: their pages are memory whether or not
// a process maps them (a memfd written with write() and never mapped is
// in no process's RSS). A file also mapped counts twice, on the safe side.
type shmemFiles struct {
	seen  map[[2]uint64]bool // device, inode
	shmem map[uint64]bool    // device: memory-backed
}

// Filesystem magics (statfs f_type) of memory-backed files.
const (
	tmpfsMagic     = 0x01021994
	hugetlbfsMagic = 0x958458f6
)

// held is the size (allocated blocks) of the memory-backed files pid
// holds open not counted yet.
func (f *shmemFiles) held(pid int) int64 {
	dir := "/proc/" + strconv.Itoa(pid) + "/fd/"
	d, err := os.Open(dir)
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var total int64
	for _, n := range names {
		var st unix.Stat_t
		if unix.Stat(dir+n, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
			continue
		}
		key := [2]uint64{st.Dev, st.Ino}
		if f.seen[key] {
			continue
		}
		f.seen[key] = true
		shm, known := f.shmem[st.Dev]
		if !known {
			var sf unix.Statfs_t
			shm = unix.Statfs(dir+n, &sf) == nil && (sf.Type == tmpfsMagic || uint32(sf.Type) == hugetlbfsMagic)
			f.shmem[st.Dev] = shm
		}
		if shm {
			total += st.Blocks * 512
		}
	}
	return total
}

// hasChildrenFiles says the kernel lists each task's children
// (/proc/PID/task/TID/children, CONFIG_PROC_CHILDREN).
var hasChildrenFiles = sync.OnceValue(func() bool {
	_, err := os.Stat("/proc/thread-self/children")
	return err == nil
})

// childrenTree lists the descendants of root by the children files of
// each of their threads, which costs in proportion to the tree rather
// than to every process on the host (a /proc scan took 10 ms with 335
// processes on a loaded 2-core host). ok is false where the kernel has no
// such files or root is gone: the caller scans /proc instead. Like the
// scan it is not atomic: a process forked during the walk, or reparented
// to an ancestor already read, is missed by this sample and found by the
// next.
func childrenTree(root int) (members []int, ok bool) {
	if !hasChildrenFiles() {
		return nil, false
	}
	seen := map[int]bool{root: true}
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dir := "/proc/" + strconv.Itoa(p) + "/task/"
		d, err := os.Open(dir)
		if err != nil {
			if p == root {
				return nil, false
			}
			continue // gone meanwhile
		}
		tids, _ := d.Readdirnames(-1)
		d.Close()
		for _, tid := range tids {
			b, err := os.ReadFile(dir + tid + "/children")
			if err != nil {
				continue
			}
			for _, f := range bytes.Fields(b) {
				c, err := strconv.Atoi(string(f))
				if err != nil || seen[c] {
					continue
				}
				seen[c] = true
				members = append(members, c)
				stack = append(stack, c)
			}
		}
	}
	return members, true
}

// statusFields are the lines of /proc/PID/status TreeMemory adds up.
var statusFields = [][]byte{[]byte("RssAnon:"), []byte("RssShmem:"), []byte("VmSwap:")}

// residentBytes is one process's share of TreeMemory: 0 for a process
// that is gone, a zombie or a kernel thread (no such lines).
func residentBytes(pid int, buf []byte) int64 {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/status", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0
	}
	return parseStatusMemory(buf[:n])
}

// parseStatusMemory adds up statusFields in a status file's text (in kB).
func parseStatusMemory(b []byte) int64 {
	var total int64
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		for _, f := range statusFields {
			if v, ok := bytes.CutPrefix(line, f); ok {
				v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
				if kb, err := strconv.ParseInt(string(v), 10, 64); err == nil {
					total += kb << 10
				}
			}
		}
	}
	return total
}

// The memory watch's pace (see MemoryWatch): it samples again after the
// time the run would need to fill what is left below the bound at the
// rate it grew since the last sample, and at least cpuRate per CPU,
// within [minWatchEvery, maxWatchEvery]; and never sooner than
// scanShare times the last sample took, so that sampling a host with
// many processes near the bound costs at most a quarter of one core.
const (
	minWatchEvery = 10 * time.Millisecond
	maxWatchEvery = 200 * time.Millisecond
	// cpuRate is how fast one CPU is assumed to fill fresh pages, above
	// what one process touching them reached on the machines this was
	// measured on (docs/memory-bound.md).
	cpuRate   = 1 << 30 // bytes per second
	scanShare = 4
)

// watchEvery is the wait before the next sample when used bytes of bound
// are held, the tree grew at rate bytes per second, at least assumed are
// expected, and the last sample took scan.
func watchEvery(used, bound int64, rate, assumed float64, scan time.Duration) time.Duration {
	rate = max(rate, assumed)
	d := time.Duration(float64(bound-used) / rate * float64(time.Second))
	return max(min(max(d, minWatchEvery), maxWatchEvery), scanShare*scan)
}

// MemoryWatch bounds the summed memory of a run's tree (TreeMemory) where
// no memory cgroup can: it samples the tree, and the first sample above
// the bound is sent on Over, for the supervision to end the whole run.
// Between two samples the tree may grow past the bound: the overshoot is
// at most what it allocates in one interval, which the pace keeps small
// near the bound (docs/memory-bound.md has the measurements).
type MemoryWatch struct {
	root  int
	bound int64
	over  chan int64
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	peak  atomic.Int64
}

// WatchMemory starts watching the descendants of root against bound
// bytes (bound > 0).
func WatchMemory(root int, bound int64) *MemoryWatch {
	w := &MemoryWatch{root: root, bound: bound, over: make(chan int64, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go w.loop(float64(cpuRate * runtime.NumCPU()))
	return w
}

func (w *MemoryWatch) loop(assumed float64) {
	defer close(w.done)
	var last int64
	lastAt := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	var rate float64
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		start := time.Now()
		used, _, err := TreeMemory(w.root)
		now := time.Now()
		if err == nil {
			if used > w.peak.Load() {
				w.peak.Store(used)
			}
			if used > w.bound {
				w.over <- used
				return
			}
			if dt := now.Sub(lastAt).Seconds(); dt > 0 {
				rate = float64(used-last) / dt
			}
			last, lastAt = used, now
		}
		t.Reset(watchEvery(used, w.bound, rate, assumed, now.Sub(start)))
	}
}

// Over receives the sample that passed the bound, once; nil on a nil
// watch (no bound), which a select never chooses.
func (w *MemoryWatch) Over() <-chan int64 {
	if w == nil {
		return nil
	}
	return w.over
}

// Stop ends the watch and waits for it; safe on a nil watch and more
// than once.
func (w *MemoryWatch) Stop() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.stop) })
	<-w.done
}

// Peak is the highest sample so far (the one that passed the bound, when
// one did).
func (w *MemoryWatch) Peak() int64 {
	if w == nil {
		return 0
	}
	return w.peak.Load()
}
