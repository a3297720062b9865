//go:build linux

package confine_test

import (
	"context"
	"os/exec"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/spec"
)

// ballast is memory the launcher holds, so that it is bigger than any
// process of the run: a library caller often is.
var ballast []byte

// An OOM kill in the run's memory cgroup must never reach the launcher.
// The run's init shares the launcher's address space (CLONE_VM), and the
// OOM killer kills every process sharing its victim's: an init inside the
// cgroup, looking as big as the launcher, would be the victim and take
// this test process down with it. The command joins the cgroup; the init
// stays out.
func TestMemoryBoundSparesLauncher(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("not applicable here: python3 missing (%v)", err)
	}
	ballast = make([]byte, 96<<20)
	for i := range ballast {
		if i%4096 == 0 {
			ballast[i] = 1
		}
	}
	defer func() { ballast = nil }()
	_, c := mint(t, "default", 0)
	s := shSpec(worktree(t), `i=0; while [ $i -lt 24 ]; do python3 -c 'import time; b = bytearray(6 << 20); time.sleep(3)' & i=$((i+1)); done; wait; echo survived`)
	s.Limits = spec.Limits{MemoryBytes: 64 << 20}
	res, err := confine.RunCommand(context.Background(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.MemoryBound != "memory-cgroup" {
		t.Skipf("not applicable here: memory_bound %q (no memory cgroup can be made)", res.MemoryBound)
	}
	if !res.OOMKilled || res.Stdout.Text() != "survived\n" {
		t.Fatalf("oom_killed %v, stdout %q (the shell should outlive its killed children)", res.OOMKilled, res.Stdout.Text())
	}
}
