//go:build linux

package planner

// UsesMemoryCgroup says whether the run gets a memory cgroup of its own.
// On cgroup v2 a process is in one cgroup only: a run in its memory
// cgroup is out of its pids cgroup, so that one must bound its tasks too
// (host.MemoryCgroup.Pids); where it cannot, the run keeps its pids
// cgroup and goes without (each process bounded by RLIMIT_DATA, as the
// result says).
func (in *Inputs) UsesMemoryCgroup() bool {
	mc := in.Host.MemoryCgroup
	if mc.Parent == "" || in.Limits.MemoryBytes <= 0 {
		return false
	}
	return !mc.V2 || !in.WantPidsGroup || mc.Pids
}

// memoryMax is the run's memory cgroup's bound: --memory, or less where
// the cgroup is made beside the launcher (v2) and the launcher's own
// cgroups allow less: a run never gets more than its caller.
func (in *Inputs) memoryMax() int64 {
	if c := in.Host.MemoryCgroup.Cap; c > 0 && c < in.Limits.MemoryBytes {
		return c
	}
	return in.Limits.MemoryBytes
}
