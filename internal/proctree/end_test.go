//go:build linux

package proctree

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestEnder ends real trees through the same steps a run's supervisor
// takes: SIGTERM, the grace period, SIGKILL sweeps.
func TestEnder(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	self := os.Getpid()
	cases := []struct {
		name   string
		script string // "" starts nothing
		// wantGrace: SIGTERM is not enough, so the grace period must end
		// and Kill finish the job.
		wantGrace, killAtOnce bool
	}{
		{name: "term is enough", script: `sleep 300 & sleep 300 & echo ready; wait`},
		{name: "term ignored", script: `trap "" TERM; (trap "" TERM; sleep 300) & echo ready; wait`, wantGrace: true},
		{name: "nothing to end", killAtOnce: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer reapChildren()
			if c.script != "" {
				startReady(t, c.script)
			}
			e := EndTree(self, 200*time.Millisecond)
			defer e.Stop()
			if !e.Terminate() {
				t.Fatal("first Terminate reported the tree already ending")
			}
			if e.Terminate() {
				t.Error("second Terminate did not report the tree already ending")
			}
			if e.Killing() != c.killAtOnce {
				t.Fatalf("Killing() = %v right after Terminate, want %v", e.Killing(), c.killAtOnce)
			}
			graced := false
			for deadline := time.After(30 * time.Second); ; {
				reapChildren()
				if ds, _ := Descendants(self); len(ds) == 0 {
					break
				}
				select {
				case <-e.Grace():
					graced = true
					e.Kill()
					if e.Tick() == nil {
						t.Fatal("no sweep ticks after Kill")
					}
				case <-e.Tick():
					e.Sweep()
				case <-time.After(10 * time.Millisecond):
				case <-deadline:
					ds, _ := Descendants(self)
					t.Fatalf("tree not gone after 30 s: %v", ds)
				}
			}
			if c.wantGrace && !graced {
				t.Error("a tree ignoring SIGTERM ended before the grace period")
			}
		})
	}
}

// startReady starts `sh -c script` and returns its pid once the script
// printed "ready".
func startReady(t *testing.T, script string) int {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Read(make([]byte, 6)); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func reapChildren() {
	for {
		if pid, err := unix.Wait4(-1, nil, unix.WNOHANG|unix.WALL, nil); err != nil || pid <= 0 {
			return
		}
	}
}
