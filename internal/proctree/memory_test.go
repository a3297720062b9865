//go:build linux

package proctree

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestParseStatusMemory(t *testing.T) {
	for _, tc := range []struct {
		name, status string
		want         int64
	}{
		{"anon, shmem and swap add up", "Name:\tx\nVmRSS:\t  900 kB\nRssAnon:\t  100 kB\nRssFile:\t  500 kB\nRssShmem:\t  20 kB\nVmSwap:\t  3 kB\n", 123 << 10},
		{"file-backed pages are not counted", "RssFile:\t 4096 kB\n", 0},
		{"a kernel thread or zombie has none", "Name:\tkthreadd\nState:\tS\n", 0},
		{"no trailing newline", "RssAnon:\t7 kB", 7 << 10},
		{"a comm that looks like a field is not one", "Name:\tRssAnon: 999 kB\nRssAnon:\t1 kB\n", 1 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseStatusMemory([]byte(tc.status)); got != tc.want {
				t.Fatalf("parseStatusMemory = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestWatchEvery(t *testing.T) {
	at := func(bytes, rate float64) time.Duration { return time.Duration(bytes / rate * float64(time.Second)) }
	const assumed = 2 * cpuRate
	for _, tc := range []struct {
		name        string
		used, bound int64
		rate        float64
		scan        time.Duration
		want        time.Duration
	}{
		{"far below the bound: the slowest pace", 0, 64 << 30, 0, 0, maxWatchEvery},
		{"at the bound: the fastest", 600 << 20, 600 << 20, 0, 0, minWatchEvery},
		{"above it (a sample that failed): the fastest", 700 << 20, 600 << 20, 0, 0, minWatchEvery},
		{"a slower tree waits as for the assumed rate", 0, 100 << 20, 1, 0, at(100<<20, assumed)},
		{"a faster tree shortens the wait", 0, 100 << 20, 4 * assumed, 0, at(100<<20, 4*assumed)},
		{"a shrinking tree waits as for the assumed rate", 0, 100 << 20, -1e9, 0, at(100<<20, assumed)},
		{"a slow scan spaces the samples out, even near the bound", 600 << 20, 600 << 20, 0, 30 * time.Millisecond, scanShare * 30 * time.Millisecond},
		{"and past the slowest pace", 0, 64 << 30, 0, time.Second, scanShare * time.Second},
		{"a fast scan changes nothing", 0, 100 << 20, 0, time.Millisecond, at(100<<20, assumed)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := watchEvery(tc.used, tc.bound, tc.rate, assumed, tc.scan); got != tc.want {
				t.Fatalf("watchEvery(%d, %d, %g, %g, %v) = %v, want %v", tc.used, tc.bound, tc.rate, float64(assumed), tc.scan, got, tc.want)
			}
		})
	}
}

const holdEnv = "PROCTREE_TEST_HOLD"

// TestHelperHold maps MIB MiB (private or shared anonymous memory, from
// holdEnv "MIB:KIND"; or writes them to a memfd it holds open twice and
// never maps), touches every page, says "held" and sleeps: the
// process TreeMemory must see (a no-op unless started by a test).
func TestHelperHold(t *testing.T) {
	v := os.Getenv(holdEnv)
	if v == "" {
		return
	}
	mibS, kind, _ := strings.Cut(v, ":")
	mib, _ := strconv.Atoi(mibS)
	if kind == "memfd" {
		// Written, never mapped: in no RSS.
		fd, err := unix.MemfdCreate("hold", 0)
		if err != nil {
			os.Exit(3)
		}
		chunk := make([]byte, 1<<20)
		for i := 0; i < mib; i++ {
			if _, err := unix.Write(fd, chunk); err != nil {
				os.Exit(3)
			}
		}
		// The same file open twice counts once.
		if _, err := unix.Dup(fd); err != nil {
			os.Exit(3)
		}
		os.Stdout.WriteString("held\n")
		time.Sleep(300 * time.Second)
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if kind == "shared" {
		flags = unix.MAP_SHARED | unix.MAP_ANONYMOUS
	}
	mem, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		os.Exit(3)
	}
	for i := 0; i < len(mem); i += os.Getpagesize() {
		mem[i] = 1
	}
	os.Stdout.WriteString("held\n")
	time.Sleep(300 * time.Second)
}

// startHolder starts TestHelperHold holding mib MiB of kind and waits
// until it holds them.
func startHolder(t *testing.T, mib int, kind string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), holdEnv+"="+strconv.Itoa(mib)+":"+kind)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "held\n" {
		t.Fatalf("holder of %d MiB %s: %q, %v", mib, kind, line, err)
	}
	return cmd
}

// TreeMemory counts what a child holds, private, shared or in a memfd it
// never maps (once, though open twice), and nothing of root itself (this
// test binary).
func TestTreeMemory(t *testing.T) {
	for _, kind := range []string{"private", "shared", "memfd"} {
		t.Run(kind, func(t *testing.T) {
			h := startHolder(t, 64, kind)
			got, n, err := TreeMemory(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			// The holder's Go runtime adds a few MiB of its own.
			if got < 64<<20 || got > 96<<20 || n < 1 {
				t.Fatalf("TreeMemory = %d bytes over %d processes, want 64 to 96 MiB", got, n)
			}
			below, _, err := TreeMemory(h.Process.Pid)
			if err != nil || below != 0 {
				t.Fatalf("TreeMemory(holder) = %d, %v: the holder has no descendants, root is not counted", below, err)
			}
		})
	}
}

// A watch fires once the tree passes its bound, with the sample that
// did; below it, it never fires and its peak is what the tree held.
func TestWatchMemory(t *testing.T) {
	startHolder(t, 64, "shared")
	over := WatchMemory(os.Getpid(), 32<<20)
	got := <-over.Over()
	over.Stop()
	if got <= 32<<20 || over.Peak() != got {
		t.Fatalf("over the bound: sample %d, peak %d; want one above 32 MiB, and the peak that sample", got, over.Peak())
	}

	under := WatchMemory(os.Getpid(), 1<<30)
	for i := 0; under.Peak() < 64<<20; i++ {
		if i == 12000 {
			t.Fatalf("peak %d after 12000 waits of 5 ms: the watch never sampled the 64 MiB holder", under.Peak())
		}
		time.Sleep(5 * time.Millisecond)
	}
	under.Stop()
	select {
	case v := <-under.Over():
		t.Fatalf("a tree of %d bytes fired a 1 GiB bound", v)
	default:
	}
	under.Stop() // twice is fine
	var none *MemoryWatch
	none.Stop()
	if none.Over() != nil || none.Peak() != 0 {
		t.Fatal("a nil watch must be inert")
	}
}

// BenchmarkTreeMemory is one sample: a scan of /proc and the status of
// each process of the tree (here, the holder of the test's own tree).
func BenchmarkTreeMemory(b *testing.B) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHold$")
	cmd.Env = append(os.Environ(), holdEnv+"=8:private")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, _, err := TreeMemory(os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}

// The children-file walk finds the same descendants as the /proc scan:
// nested ones, threads' children, and an orphan reparented to this
// subreaper.
func TestChildrenTreeMatchesScan(t *testing.T) {
	if !hasChildrenFiles() {
		t.Skip("not applicable on this kernel: no /proc/PID/task/TID/children (CONFIG_PROC_CHILDREN); TreeMemory scans /proc, which TestTasks covers")
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	cmd := exec.Command("/bin/sh", "-c", `(sleep 300 &) ; sh -c 'sleep 300 & wait' & sleep 300 & echo ready; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		Signal(os.Getpid(), unix.SIGKILL)
		_ = cmd.Wait()
		for {
			if _, err := unix.Wait4(-1, nil, unix.WNOHANG, nil); err != nil {
				break
			}
		}
	}()
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	sorted := func(s []int) string {
		slices.Sort(s)
		return fmt.Sprint(s)
	}
	// sh, the orphan, the inner sh and its sleep, the outer sleep.
	for i := 0; ; i++ {
		walk, ok := childrenTree(os.Getpid())
		_, scan, err := tree(os.Getpid())
		if !ok || err != nil {
			t.Fatalf("childrenTree ok %v, tree %v", ok, err)
		}
		if len(scan) == 5 && sorted(walk) == sorted(scan) {
			break
		}
		// The shells start their children when the host lets them: wait
		// (up to a minute on a loaded host) for the tree to be complete.
		if i == 6000 {
			t.Fatalf("children walk %s, /proc scan %s: want the same 5 processes", sorted(walk), sorted(scan))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := childrenTree(1 << 30); ok {
		t.Fatal("childrenTree of a pid that does not exist must fall back (ok false)")
	}
}
