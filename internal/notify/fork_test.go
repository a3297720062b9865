//go:build linux && amd64

package notify

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// envFork makes the test filter send clone, fork and vfork too.
const envFork = "NOTIFY_TEST_FORK"

// rawForkPause forks with a raw clone; the child blocks forever (SIGKILL
// when its parent thread exits) without touching the Go runtime.
//
//go:nosplit
func rawForkPause() (int, unix.Errno) {
	r, _, e := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if e != 0 {
		return 0, unix.Errno(e)
	}
	if r != 0 {
		return int(r), 0
	}
	syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0)
	for {
		syscall.RawSyscall6(syscall.SYS_PPOLL, 0, 0, 0, 0, 0, 0)
	}
}

// runForks is the probe's "forks" call: op.Flags threads (at least one)
// fork children that block, concurrently, until a fork fails or op.Iter
// children exist. It reports the children made (OK), the probe's own
// threads once they stopped (Fail) and the first error, then kills the
// children.
func runForks(op probeOp) probeResult {
	workers := max(op.Flags, 1)
	var mu sync.Mutex
	var pids []int
	var first unix.Errno
	reserved := 0 // children being forked or made: the cap holds under concurrency
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var stopped sync.WaitGroup
	for range workers {
		wg.Add(1)
		stopped.Add(1)
		go func() {
			// The children die with this thread: keep it until the count
			// is taken.
			runtime.LockOSThread()
			defer func() { stopped.Done(); <-stop }()
			defer wg.Done()
			for {
				mu.Lock()
				if reserved >= op.Iter || first != 0 {
					mu.Unlock()
					return
				}
				reserved++
				mu.Unlock()
				pid, e := rawForkPause()
				mu.Lock()
				if e != 0 {
					reserved--
					if first == 0 {
						first = e
					}
				} else {
					pids = append(pids, pid)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	stopped.Wait()
	threads := threadCount()
	for _, p := range pids {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	for _, p := range pids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(p, &ws, 0, nil)
	}
	close(stop)
	return probeResult{Errno: int(first), Err: errName(first), OK: len(pids), Fail: threads}
}

func threadCount() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// TestForkLimit: a probe under the filter, its supervisor bounding this
// test process's descendants to max tasks, forks from several threads at
// once until refused. Its children plus its own threads never exceed max,
// the refusal is EAGAIN, and it is not refused far below max. The control
// (unconfined) makes more children than max allows.
func TestForkLimit(t *testing.T) {
	needRoot(t)
	t.Setenv(envFork, "1")
	fx := newFixture(t, 0)
	const cap = 200
	for _, c := range []struct {
		max, workers int
	}{{24, 1}, {40, 4}, {64, 8}} {
		t.Run(strconv.Itoa(c.max)+"x"+strconv.Itoa(c.workers), func(t *testing.T) {
			op := []probeOp{{Name: "forks", Call: "forks", Iter: cap, Flags: c.workers}}
			ctl := runProbe(t, fx, op, runOpts{})[0]
			if ctl.OK != cap {
				t.Fatalf("control made %d children (%s), want %d: the vector does not work here", ctl.OK, ctl.Err, cap)
			}
			stats := &Stats{}
			cfg := fx.config(stats)
			cfg.RunInit, cfg.MaxTasks = os.Getpid(), c.max
			r := runProbe(t, fx, op, runOpts{confined: true, cfg: cfg})[0]
			t.Logf("max %d, %d workers: %d children + %d threads, then %s; decisions %+v",
				c.max, c.workers, r.OK, r.Fail, r.Err, stats.Counts())
			if r.Errno != int(unix.EAGAIN) {
				t.Fatalf("forks ended with %s after %d children, want EAGAIN", r.Err, r.OK)
			}
			if r.OK+r.Fail > c.max {
				t.Errorf("the run held %d tasks (%d children + %d threads), over the limit %d", r.OK+r.Fail, r.OK, r.Fail, c.max)
			}
			// Refused early only by creations still counted as in flight:
			// at most one per thread of the probe.
			if r.OK+r.Fail < c.max-r.Fail {
				t.Errorf("refused at %d tasks, far below the limit %d", r.OK+r.Fail, c.max)
			}
			ds := stats.Denials()
			if len(ds) == 0 || !strings.Contains(ds[len(ds)-1].Reason, "bounded-processes") {
				t.Errorf("denials %+v: want the refused clone recorded", ds)
			}
		})
	}
}

// mayBeCreating tells finished creations from possibly unfinished ones.
func TestMayBeCreating(t *testing.T) {
	c := newForkCounter(os.Getpid(), 1)
	sleeper := exec.Command("/bin/sleep", "300")
	busy := exec.Command("/bin/sh", "-c", "while :; do :; done")
	for _, cmd := range []*exec.Cmd{sleeper, busy} {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	}
	// Until the sleeper is blocked in its nanosleep.
	for i := 0; i < 1000 && c.mayBeCreating(sleeper.Process.Pid); i++ {
		runtime.Gosched()
	}
	if c.mayBeCreating(sleeper.Process.Pid) {
		t.Errorf("a task blocked in nanosleep counts as creating")
	}
	if !c.mayBeCreating(busy.Process.Pid) {
		t.Errorf("a running task does not count as creating")
	}
	gone := exec.Command("/bin/true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	if c.mayBeCreating(gone.Process.Pid) {
		t.Errorf("a reaped task counts as creating")
	}
}

func TestServeForkConfig(t *testing.T) {
	if err := Serve(t.Context(), -1, Config{MaxTasks: 5}); err == nil || !strings.Contains(err.Error(), "init") {
		t.Errorf("Serve with MaxTasks and no RunInit: %v", err)
	}
}
