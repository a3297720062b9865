//go:build linux

package launch

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/plan"
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
	var pids int64
	if p.MemoryCgroupV2 && p.PidsCgroup != "" {
		// On v2 the command leaves the pids cgroup (init's) for this
		// one: it takes the bound with it.
		pids = p.PidsMax
	}
	err := host.CreateMemoryCgroup(memCgroup(p), p.MemoryCgroup, p.MemoryMax, pids)
	if err == nil || errors.Is(err, fs.ErrExist) {
		// Exists: created for a namespaces attempt this run fell back from.
		return nil
	}
	return fmt.Errorf("%w: %s: cannot create a memory cgroup: %v", spec.ErrUnavailable, spec.GResources, err)
}

// memoryStats reads what p's memory cgroup recorded, once the tree is gone.
func memoryStats(p *plan.Plan) (host.MemoryStats, error) {
	if p.MemoryCgroup == "" {
		return host.MemoryStats{}, nil
	}
	return host.ReadMemoryStats(memCgroup(p), p.MemoryCgroup)
}
