//go:build linux

package proctree

import (
	"bytes"
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
// every process of a build for the same libc. A tmpfs or memfd file that
// no process maps is not resident in any process and not counted either
// (bounded per file by RLIMIT_FSIZE).
func TreeMemory(root int) (bytes int64, procs int, err error) {
	_, members, err := tree(root)
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 4096)
	for _, pid := range members {
		bytes += residentBytes(pid, buf)
	}
	return bytes, len(members), nil
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
// fastest rate it has shown, and at least assumedRate, within
// [minWatchEvery, maxWatchEvery].
const (
	minWatchEvery = 10 * time.Millisecond
	maxWatchEvery = 200 * time.Millisecond
	// assumedRate is what one process touching fresh pages reached on the
	// machines this was measured on (docs/memory-bound.md), times two.
	assumedRate = 2 << 30 // bytes per second
)

// watchEvery is the wait before the next sample when used bytes of bound
// are held and the tree grew at rate bytes per second.
func watchEvery(used, bound int64, rate float64) time.Duration {
	rate = max(rate, assumedRate)
	d := time.Duration(float64(bound-used) / rate * float64(time.Second))
	return min(max(d, minWatchEvery), maxWatchEvery)
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
	go w.loop()
	return w
}

func (w *MemoryWatch) loop() {
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
		t.Reset(watchEvery(used, w.bound, rate))
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
