//go:build linux

package confine

import "github.com/confine-sandbox/confine/internal/host"

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: half the machine's RAM, at most the caller's own cgroup
// limit (host.DefaultMemoryBound); fallback where RAM is unknown.
func defaultMemory(fallback int64) int64 { return host.DefaultMemoryBound(fallback) }

// usesMemoryCgroup says whether the run gets a memory cgroup of its own.
// On cgroup v2 a process is in one cgroup only: a run in its memory
// cgroup is out of its pids cgroup, so that one must bound its tasks too
// (host.MemoryCgroup.Pids); where it cannot, the run keeps its pids
// cgroup and goes without (each process bounded by RLIMIT_DATA, as the
// result says).
func (in *inputs) usesMemoryCgroup() bool {
	mc := in.h.MemoryCgroup
	if mc.Parent == "" || in.limits.MemoryBytes <= 0 {
		return false
	}
	return !mc.V2 || !in.wantPidsGroup || mc.Pids
}

// memoryMax is the run's memory cgroup's bound: --memory, or less where
// the cgroup is made beside the launcher (v2) and the launcher's own
// cgroups allow less: a run never gets more than its caller.
func (in *inputs) memoryMax() int64 {
	if c := in.h.MemoryCgroup.Cap; c > 0 && c < in.limits.MemoryBytes {
		return c
	}
	return in.limits.MemoryBytes
}
