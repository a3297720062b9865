package seatbelt

// Proc is one process as the kill sweep sees it (kern.proc on macOS).
type Proc struct{ Pid, Ppid, Pgid int }

// Doomed returns the processes a run's kill sweep signals: every process
// in the leader's process group, and every process whose parent chain
// reaches the leader, the leader itself excluded. A process that left the
// group (setsid, setpgid) and whose parent died was reparented to launchd
// (pid 1): no chain reaches the leader any more, and it is not found. This
// is why tree kill is not a guarantee on macOS.
func Doomed(procs []Proc, leader int) []int {
	parent := make(map[int]int, len(procs))
	for _, p := range procs {
		parent[p.Pid] = p.Ppid
	}
	var out []int
	for _, p := range procs {
		if p.Pid != leader && (p.Pgid == leader || descends(p.Pid, leader, parent)) {
			out = append(out, p.Pid)
		}
	}
	return out
}

// descends follows pid's parents up to leader; the bound stops a cycle in
// a snapshot taken while pids were reused.
func descends(pid, leader int, parent map[int]int) bool {
	for i := 0; i < 4096 && pid > 1; i++ {
		next, ok := parent[pid]
		if !ok {
			return false
		}
		if next == leader {
			return true
		}
		pid = next
	}
	return false
}
