//go:build linux

package proctree

import (
	"bufio"
	"os"
	"os/exec"
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
	for _, tc := range []struct {
		name        string
		used, bound int64
		rate        float64
		want        time.Duration
	}{
		{"far below the bound: the slowest pace", 0, 64 << 30, 0, maxWatchEvery},
		{"at the bound: the fastest", 600 << 20, 600 << 20, 0, minWatchEvery},
		{"above it (a sample that failed): the fastest", 700 << 20, 600 << 20, 0, minWatchEvery},
		{"a slower tree waits as for the assumed rate", 0, 100 << 20, 0, at(100<<20, assumedRate)},
		{"a faster observed rate shortens the wait", 0, 100 << 20, 4 * assumedRate, at(100<<20, 4*assumedRate)},
		{"a shrinking tree waits as for the assumed rate", 0, 100 << 20, -1e9, at(100<<20, assumedRate)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := watchEvery(tc.used, tc.bound, tc.rate); got != tc.want {
				t.Fatalf("watchEvery(%d, %d, %g) = %v, want %v", tc.used, tc.bound, tc.rate, got, tc.want)
			}
		})
	}
}

const holdEnv = "PROCTREE_TEST_HOLD"

// TestHelperHold maps MIB MiB (private or shared anonymous memory, from
// holdEnv "MIB:KIND"), touches every page, says "held" and sleeps: the
// process TreeMemory must see (a no-op unless started by a test).
func TestHelperHold(t *testing.T) {
	v := os.Getenv(holdEnv)
	if v == "" {
		return
	}
	mibS, kind, _ := strings.Cut(v, ":")
	mib, _ := strconv.Atoi(mibS)
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

// TreeMemory counts what a child holds, private or shared, and nothing of
// root itself (this test binary).
func TestTreeMemory(t *testing.T) {
	for _, kind := range []string{"private", "shared"} {
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
		if i == 1000 {
			t.Fatalf("peak %d after 1000 waits: the watch never sampled the 64 MiB holder", under.Peak())
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
