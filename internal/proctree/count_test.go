//go:build linux

package proctree

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// threadsOf reads the Threads: line of /proc/PID/status.
func threadsOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no Threads: line for %d", pid)
	return 0
}

// Tasks counts every thread of every descendant, an orphan reparented to
// a subreaper root included, and nothing of root itself.
func TestTasks(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	// sh -> (a threaded Go process: this test binary in
	// TestHelperSleep; a sleep; an orphaned sleep whose parent subshell
	// exits at once).
	cmd := exec.Command("/bin/sh", "-c", `"$0" -test.run=^TestHelperSleep$ & (sleep 300 &) ; sleep 300 & echo ready; wait`, os.Args[0])
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := cmd.Process.Pid
	defer func() {
		Signal(os.Getpid(), unix.SIGKILL)
		_ = cmd.Wait()
		for {
			if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err != nil {
				break
			}
		}
	}()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	// Compare with the sum over Descendants, counted thread by thread,
	// once the tree is complete and steady.
	for i := 0; ; i++ {
		ds, err := Descendants(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		want := 0
		for _, p := range ds {
			want += threadsOf(t, p)
		}
		got, err := Tasks(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Descendants(os.Getpid())
		// The Go helper starts its runtime threads some time after
		// exec, so the tree is steady only once they exist.
		settled := len(again) == len(ds) && len(ds) == 4 && countComm(ds, "sleep") == 2 && want >= 5
		if settled && got == want {
			break
		}
		if i < 500 {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if want < 5 {
			t.Fatalf("only %d tasks in %v after 5 s: the Go helper should add several threads", want, ds)
		}
		t.Fatalf("Tasks = %d, want %d (descendants %v: want sh, the helper and both sleeps, one orphaned)", got, want, ds)
	}
	below, err := Tasks(sh)
	if err != nil {
		t.Fatal(err)
	}
	all, _ := Tasks(os.Getpid())
	// sh itself is excluded, and so is the orphan, reparented to us.
	if below != all-2 {
		t.Errorf("Tasks(sh) = %d, want Tasks(self) - 2 = %d (sh and the orphan excluded)", below, all-2)
	}
}

const helperEnv = "PROCTREE_TEST_HELPER"

// TestHelperSleep is the threaded process of TestTasks (a no-op unless
// started by it).
func TestHelperSleep(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		return
	}
	time.Sleep(300 * time.Second)
}

func TestStatCountsParsesHostileComm(t *testing.T) {
	pp, th, ok := statCounts(os.Getpid(), make([]byte, 1024))
	if !ok || pp != os.Getppid() || th != threadsOf(t, os.Getpid()) {
		t.Fatalf("statCounts = %d, %d, %v; want ppid %d, threads %d", pp, th, ok, os.Getppid(), threadsOf(t, os.Getpid()))
	}
}
