//go:build linux

package notify

import (
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadStatusFresh: the handler keeps a descriptor of a thread's
// /proc/<tid>/status between notifications (taskFiles), but every read
// must show the thread's credentials and umask as they are now, and a
// thread that is gone must read as gone (its descriptor dropped), not as it
// was.
// lockedThread runs functions on a thread of its own (never the main
// thread), which ends when stop is called; tid is its id.
func lockedThread() (tid int, on func(func()), stop func()) {
	do := make(chan func())
	done := make(chan struct{})
	tidc := make(chan int)
	var serve func()
	serve = func() {
		// The thread is never unlocked: it dies with the goroutine,
		// taking its changed credentials with it.
		runtime.LockOSThread()
		if unix.Gettid() == os.Getpid() {
			// The main thread outlives its goroutine: serve from
			// another thread, keeping this one locked meanwhile so
			// the new goroutine cannot run on it.
			fin := make(chan struct{})
			go func() { serve(); close(fin) }()
			<-fin
			runtime.UnlockOSThread()
			return
		}
		tidc <- unix.Gettid()
		for f := range do {
			f()
			done <- struct{}{}
		}
	}
	go serve()
	tid = <-tidc
	return tid, func(f func()) { do <- f; <-done }, func() { close(do) }
}

// waitGone waits until tid has left /proc.
func waitGone(t *testing.T, tid int) {
	for i := 0; ; i++ {
		if _, err := os.Stat(procPath(tid, "")); os.IsNotExist(err) {
			return
		}
		if i == 10000 {
			st, _ := os.ReadFile(procPath(tid, "status"))
			t.Fatalf("thread %d (pid %d) still in /proc: %.200s", tid, os.Getpid(), st)
		}
		runtime.Gosched()
		unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
	}
}

func TestReadStatusFresh(t *testing.T) {
	root := os.Geteuid() == 0
	tid, on, stop := lockedThread()
	old := unix.Umask(0o022)
	defer unix.Umask(old)

	h := &handler{status: make([]byte, 64)} // small: the read must grow it
	defer h.closeTaskFiles()
	steps := []struct {
		name     string
		root     bool // switches ids on the thread: needs root
		act      func()
		umask    int
		egid     uint32
		wantFile bool // the descriptor is cached after the read
	}{
		{name: "first read", act: func() {}, umask: 0o022, egid: uint32(os.Getegid()), wantFile: true},
		{name: "umask changed", act: func() { unix.Umask(0o077) }, umask: 0o077, egid: uint32(os.Getegid()), wantFile: true},
		{name: "egid changed on the thread only", root: true,
			act: func() { _ = setresgid(-1, 65534, -1) }, umask: 0o077, egid: 65534, wantFile: true},
		{name: "egid back", root: true,
			act: func() { _ = setresgid(-1, 0, -1) }, umask: 0o077, egid: 0, wantFile: true},
	}
	for _, s := range steps {
		if s.root && !root {
			t.Logf("%s: skipped, switching a thread's ids needs root", s.name)
			continue
		}
		on(s.act)
		st, ok := h.readStatus(tid, true)
		if !ok {
			t.Fatalf("%s: readStatus(%d) failed", s.name, tid)
		}
		if st.umask != s.umask || st.cr.egid != s.egid || st.tgid != os.Getpid() {
			t.Errorf("%s: umask %#o egid %d tgid %d, want %#o %d %d", s.name, st.umask, st.cr.egid, st.tgid, s.umask, s.egid, os.Getpid())
		}
		if _, ok := h.procFiles[tid]; ok != s.wantFile {
			t.Errorf("%s: cached descriptor %v, want %v", s.name, ok, s.wantFile)
		}
	}
	if len(h.status) <= 64 {
		t.Errorf("status buffer not grown (%d bytes)", len(h.status))
	}
	// The thread ends (its goroutine returns while locked).
	stop()
	waitGone(t, tid)
	if st, ok := h.readStatus(tid, true); ok {
		t.Errorf("readStatus of the ended thread %d succeeded: %+v", tid, st)
	}
	if _, ok := h.procFiles[tid]; ok {
		t.Errorf("descriptor of the ended thread %d still cached", tid)
	}
}

// TestKeptStatus: under the persistence guard a call that creates nothing
// reads the groups the handler keeps and the ids afresh through the
// thread's pidfd; a call that creates reads the status (and its umask);
// setgroups (credChanged) makes every kept status stale; an ended thread
// reads as gone.
func TestKeptStatus(t *testing.T) {
	s := &server{creator: &creator{}}
	s.credGen.Store(1)
	h := &handler{s: s, status: make([]byte, 4096)}
	defer h.closeTaskFiles()
	tid, on, stop := lockedThread()
	old := unix.Umask(0o022)
	defer unix.Umask(old)
	if _, ok := h.readStatus(tid, false); !ok {
		t.Fatalf("readStatus(%d) failed", tid)
	}
	f := h.procFiles[tid]
	if f == nil || f.pidfd < 0 || f.gen != 1 {
		t.Skipf("no status kept here (no thread pidfds, Linux 6.9, or PIDFD_GET_INFO, 6.13): %+v", f)
	}
	if _, kept, _ := h.keptStatus(f, false); !kept || noPidfdInfo.Load() {
		t.Skip("the kernel has no PIDFD_GET_INFO (Linux 6.13): status is read for every call")
	}
	groups := f.kept.cr.groups
	root := os.Geteuid() == 0
	steps := []struct {
		name  string
		root  bool
		act   func()
		umask bool // the call creates: the status is read
		egid  uint32
		want  int    // umask wanted (-1: none)
		gen   uint64 // the generation kept after the read
	}{
		{name: "kept", act: func() {}, egid: uint32(os.Getegid()), want: -1, gen: 1},
		{name: "egid changed, read through the pidfd", root: true,
			act: func() { _ = setresgid(-1, 65534, -1) }, egid: 65534, want: -1, gen: 1},
		{name: "umask changed, a creating call reads it", act: func() { unix.Umask(0o077) }, umask: true, egid: 65534, want: 0o077, gen: 1},
		{name: "setgroups heard: the kept groups are stale", act: func() { s.credChanged() }, egid: 65534, want: 0o077, gen: 2},
		{name: "egid back", root: true, act: func() { _ = setresgid(-1, 0, -1) }, egid: 0, want: -1, gen: 2},
	}
	for _, st := range steps {
		if st.root && !root {
			t.Logf("%s: skipped, switching a thread's ids needs root", st.name)
			continue
		}
		if !root && st.egid == 65534 {
			st.egid = uint32(os.Getegid())
		}
		on(st.act)
		before := f.gen
		got, ok := h.readStatus(tid, st.umask)
		if !ok {
			t.Fatalf("%s: readStatus failed", st.name)
		}
		if got.cr.egid != st.egid || got.umask != st.want || got.tgid != os.Getpid() || !sameGroups(got.cr.groups, groups) {
			t.Errorf("%s: egid %d umask %#o tgid %d groups %v, want %d %#o %d %v", st.name, got.cr.egid, got.umask, got.tgid, got.cr.groups, st.egid, st.want, os.Getpid(), groups)
		}
		if f.gen != st.gen || (before != f.gen) != (st.gen != before) {
			t.Errorf("%s: kept at generation %d, want %d", st.name, f.gen, st.gen)
		}
	}
	stop()
	waitGone(t, tid)
	if st, ok := h.readStatus(tid, false); ok {
		t.Errorf("readStatus of the ended thread %d succeeded: %+v", tid, st)
	}
	if _, ok := h.procFiles[tid]; ok {
		t.Errorf("descriptor of the ended thread %d still cached", tid)
	}
}
