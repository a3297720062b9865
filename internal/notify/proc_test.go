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
func TestReadStatusFresh(t *testing.T) {
	root := os.Geteuid() == 0
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
	tid := <-tidc
	on := func(f func()) { do <- f; <-done }
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
		st, ok := h.readStatus(tid)
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
	close(do)
	for i := 0; ; i++ {
		if _, err := os.Stat(procPath(tid, "")); os.IsNotExist(err) {
			break
		}
		if i == 10000 {
			st, _ := os.ReadFile(procPath(tid, "status"))
			t.Fatalf("thread %d (pid %d) still in /proc: %.200s", tid, os.Getpid(), st)
		}
		runtime.Gosched()
		unix.Nanosleep(&unix.Timespec{Nsec: 1e6}, nil)
	}
	if st, ok := h.readStatus(tid); ok {
		t.Errorf("readStatus of the ended thread %d succeeded: %+v", tid, st)
	}
	if _, ok := h.procFiles[tid]; ok {
		t.Errorf("descriptor of the ended thread %d still cached", tid)
	}
}
