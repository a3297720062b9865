//go:build linux

package proctree

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A tree of sh -> (sleep, setsid sh -> sleep) is found whole from the
// test's own pid, and Signal reaches all of it.
func TestDescendantsAndSignal(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", `sleep 300 & setsid sh -c 'sleep 300 & wait' & echo ready; wait`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	buf := make([]byte, 6)
	if _, err := out.Read(buf); err != nil {
		t.Fatal(err)
	}
	var ds []int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if ds, err = Descendants(os.Getpid()); err != nil {
			t.Fatal(err)
		}
		if countComm(ds, "sleep") == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !slices.Contains(ds, cmd.Process.Pid) || countComm(ds, "sleep") != 2 || len(ds) < 4 {
		t.Fatalf("descendants %v: want sh, both sleeps and the setsid sh", ds)
	}
	if n := Signal(cmd.Process.Pid, unix.SIGKILL); n != len(ds)-1 {
		t.Fatalf("signalled %d processes below sh, want %d", n, len(ds)-1)
	}
}

func countComm(pids []int, comm string) int {
	n := 0
	for _, p := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/comm")
		if err == nil && strings.TrimSpace(string(b)) == comm {
			n++
		}
	}
	return n
}

func TestPpidParsesHostileComm(t *testing.T) {
	// A comm with spaces and ')' must not confuse the parser: this test
	// process's own entry is parsed against os.Getppid.
	buf := make([]byte, 512)
	pp, ok := ppid(os.Getpid(), buf)
	if !ok || pp != os.Getppid() {
		t.Fatalf("ppid = %d, %v; want %d", pp, ok, os.Getppid())
	}
}
