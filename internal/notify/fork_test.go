//go:build linux && (amd64 || arm64)

package notify

import (
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/probe"
)

// envFork makes the test filter send clone, fork and vfork too.
const envFork = "NOTIFY_TEST_FORK"

// runForks is the probe's "forks" call: op.Flags processes (at least one)
// fork, all at once, children that block, each until a fork fails or it
// made op.Iter children (a cap, so that the unconfined control is no real
// bomb). The forking runs outside the Go runtime, which
// aborts when it cannot make a thread it needs (as it would under
// RLIMIT_NPROC). It reports the children made (OK), the tasks of the probe
// itself, its threads and the forking processes (Fail), and the first
// error; then it kills them all. Nothing exits meanwhile, so OK + Fail is
// the run's peak.
func runForks(op probeOp) probeResult {
	runtime.GOMAXPROCS(1)
	workers := max(op.Flags, 1)
	var gate, report [2]int
	if err := unix.Pipe2(gate[:], unix.O_CLOEXEC); err != nil {
		return probeResult{Errno: -1, Err: err.Error()}
	}
	if err := unix.Pipe2(report[:], unix.O_CLOEXEC); err != nil {
		return probeResult{Errno: -1, Err: err.Error()}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var pids []int
	var first unix.Errno
	for range workers {
		pid, e := probe.RawFork(gate[0], report[1], op.Iter)
		if e != 0 {
			first = e
			break
		}
		pids = append(pids, pid)
	}
	unix.Write(gate[1], make([]byte, len(pids)))
	children := 0
	b := make([]byte, 16)
	for range pids {
		if _, err := io.ReadFull(fdReader(report[0]), b); err != nil {
			return probeResult{Errno: -1, Err: "read report: " + err.Error()}
		}
		children += int(binary.LittleEndian.Uint64(b))
		if e := unix.Errno(binary.LittleEndian.Uint64(b[8:])); e != 0 && first == 0 {
			first = e
		}
	}
	own := threadCount() + len(pids)
	for _, p := range pids {
		if err := unix.Kill(p, unix.SIGKILL); err != nil {
			// Waiting would hang; they die with this process.
			return probeResult{Errno: -1, Err: "kill a forking process: " + err.Error()}
		}
	}
	for _, p := range pids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(p, &ws, 0, nil)
	}
	for _, fd := range append(gate[:], report[:]...) {
		unix.Close(fd)
	}
	return probeResult{Errno: int(first), Err: errName(first), OK: children, Fail: own}
}

type fdReader int

func (f fdReader) Read(b []byte) (int, error) {
	n, err := unix.Read(int(f), b)
	if n < 0 {
		n = 0
	}
	if err == nil && n == 0 {
		err = io.EOF
	}
	return n, err
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
	const cap = 100 // per forking process
	for _, c := range []struct {
		max, workers int
	}{{24, 1}, {40, 4}, {64, 8}} {
		t.Run(strconv.Itoa(c.max)+"x"+strconv.Itoa(c.workers), func(t *testing.T) {
			op := []probeOp{{Name: "forks", Call: "forks", Iter: cap, Flags: c.workers}}
			ctl := runProbe(t, fx, op, runOpts{})[0]
			if ctl.OK != cap*c.workers || ctl.OK+ctl.Fail <= c.max {
				t.Fatalf("control made %d children (%s), want %d: the vector does not work here", ctl.OK, ctl.Err, cap*c.workers)
			}
			stats := &Stats{}
			cfg := fx.config(stats)
			self, err := unix.PidfdOpen(os.Getpid(), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(self)
			cfg.Init = &Init{Pid: os.Getpid(), Pidfd: self}
			cfg.Plan.Seccomp.NotifyFork, cfg.Plan.Rlimits.NProc = true, uint64(c.max)
			r := runProbe(t, fx, op, runOpts{confined: true, cfg: cfg})[0]
			t.Logf("max %d, %d forking processes: %d children + %d tasks of the probe, then %s; decisions %+v",
				c.max, c.workers, r.OK, r.Fail, r.Err, stats.Counts())
			if r.Errno != int(unix.EAGAIN) {
				t.Fatalf("forks ended with %s after %d children, want EAGAIN", r.Err, r.OK)
			}
			if r.OK+r.Fail > c.max {
				t.Errorf("the run held %d tasks (%d children + %d of the probe), over the limit %d", r.OK+r.Fail, r.OK, r.Fail, c.max)
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
	// Until the sleeper is blocked in its sleep (a liveness bound, not
	// an assertion on time).
	sleeping := func() bool {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(sleeper.Process.Pid) + "/syscall")
		f := strings.Fields(string(b))
		return len(f) > 0 && (f[0] == strconv.Itoa(unix.SYS_NANOSLEEP) || f[0] == strconv.Itoa(unix.SYS_CLOCK_NANOSLEEP))
	}
	for i := 0; i < 1000 && !sleeping(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !sleeping() {
		t.Fatalf("sleep never blocked in nanosleep")
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
	if err := Serve(t.Context(), -1, Config{Plan: &plan.Plan{Backend: plan.BackendCore, Seccomp: plan.Seccomp{NotifyFork: true}, Rlimits: plan.Rlimits{NProc: 5}}}); err == nil || !strings.Contains(err.Error(), "init") {
		t.Errorf("Serve with MaxTasks and no Init: %v", err)
	}
}
