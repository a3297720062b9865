//go:build linux

package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// memCgroup is p's memory cgroup as the host package knows it.
func memCgroup(p *plan.Plan) host.MemoryCgroup {
	return host.MemoryCgroup{Parent: filepath.Dir(p.MemoryCgroup), V2: p.MemoryCgroupV2}
}

// createMemoryCgroup creates p's memory cgroup. The guarantee was decided
// on it, so a run whose cgroup cannot be made is refused, never run with
// a weaker bound than its result would claim.
func createMemoryCgroup(p *plan.Plan) error {
	if p.MemoryCgroup == "" {
		return nil
	}
	err := host.CreateMemoryCgroup(memCgroup(p), p.MemoryCgroup, p.MemoryMax)
	if err == nil || errors.Is(err, fs.ErrExist) {
		// Exists: created for a namespaces attempt this run fell back from.
		return nil
	}
	return fmt.Errorf("%w: %s: cannot create a memory cgroup: %v", spec.ErrUnavailable, policy.GResources, err)
}

// enterMemoryCgroup moves the calling thread, which must be locked to its
// goroutine, into p's v1 memory cgroup, so that the init it clones next
// starts there; leave moves it back. Writing "0" to a v1 "tasks" file moves
// only the writer's thread, which the kernel does without the global lock a
// process migration takes (whose RCU grace period cost 6 to 15 ms per run
// here). Memory is charged to the launcher's mm, not to this thread, so
// nothing of the launcher's is counted against the run meanwhile. v2 has no
// per-thread membership for the memory controller: joinMemoryCgroup moves
// the init instead.
func enterMemoryCgroup(p *plan.Plan) (leave func() error, err error) {
	if p.MemoryCgroup == "" || p.MemoryCgroupV2 {
		return func() error { return nil }, nil
	}
	if err := os.WriteFile(filepath.Join(p.MemoryCgroup, "tasks"), []byte("0"), 0); err != nil {
		return nil, fmt.Errorf("%w: enter memory cgroup %s: %v", spec.ErrLaunch, p.MemoryCgroup, err)
	}
	return func() error {
		if err := os.WriteFile(filepath.Join(filepath.Dir(p.MemoryCgroup), "tasks"), []byte("0"), 0); err != nil {
			return fmt.Errorf("%w: leave memory cgroup %s: %v", spec.ErrLaunch, p.MemoryCgroup, err)
		}
		return nil
	}, nil
}

// joinMemoryCgroup moves the run's init (pid), which waits for the
// launcher's go-ahead, into p's v2 memory cgroup.
func joinMemoryCgroup(p *plan.Plan, pid int) error {
	if p.MemoryCgroup == "" || !p.MemoryCgroupV2 {
		return nil
	}
	if err := os.WriteFile(filepath.Join(p.MemoryCgroup, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("%w: join memory cgroup %s: %v", spec.ErrLaunch, p.MemoryCgroup, err)
	}
	return nil
}

// memoryStats reads what p's memory cgroup recorded, once the tree is gone.
func memoryStats(p *plan.Plan) (host.MemoryStats, error) {
	if p.MemoryCgroup == "" {
		return host.MemoryStats{}, nil
	}
	return host.ReadMemoryStats(memCgroup(p), p.MemoryCgroup)
}
