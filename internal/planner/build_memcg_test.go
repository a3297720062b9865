//go:build linux

package planner

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/spec"
)

// Whether a run gets a memory cgroup, and its bound, for the places a
// host can offer one: v1 (the run stays in its pids cgroup, another
// hierarchy), v2 with and without the pids controller for a run that
// needs a pids cgroup, and v2 beside a launcher whose own cgroup is
// bounded lower than --memory.
func TestUsesMemoryCgroup(t *testing.T) {
	v1 := host.MemoryCgroup{Parent: "/sys/fs/cgroup/memory/x"}
	v2 := host.MemoryCgroup{Parent: "/sys/fs/cgroup/system.slice", V2: true, Pids: true}
	v2NoPids := host.MemoryCgroup{Parent: "/sys/fs/cgroup/system.slice", V2: true}
	capped := host.MemoryCgroup{Parent: "/sys/fs/cgroup/app.slice", V2: true, Cap: 1 << 30}
	for _, tc := range []struct {
		name     string
		mc       host.MemoryCgroup
		memory   int64
		wantPids bool
		want     bool
		max      int64
	}{
		{"none", host.MemoryCgroup{}, 8 << 30, false, false, 8 << 30},
		{"no bound asked", v1, 0, false, false, 0},
		{"v1", v1, 8 << 30, true, true, 8 << 30},
		{"v2 with pids", v2, 8 << 30, true, true, 8 << 30},
		{"v2 without pids, none needed", v2NoPids, 8 << 30, false, true, 8 << 30},
		{"v2 without pids, a pids cgroup needed", v2NoPids, 8 << 30, true, false, 8 << 30},
		{"v2 capped by the launcher's cgroup", capped, 8 << 30, false, true, 1 << 30},
		{"v2 cap above --memory", capped, 256 << 20, false, true, 256 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Inputs{Host: host.Info{MemoryCgroup: tc.mc}, Limits: spec.Limits{MemoryBytes: tc.memory}, WantPidsGroup: tc.wantPids}
			if got := in.UsesMemoryCgroup(); got != tc.want {
				t.Errorf("usesMemoryCgroup = %v, want %v", got, tc.want)
			}
			if got := in.memoryMax(); got != tc.max {
				t.Errorf("memoryMax = %d, want %d", got, tc.max)
			}
		})
	}
}
