//go:build linux

package planner

import "github.com/confine-sandbox/confine/internal/ledger"

// countsForks says whether the launcher bounds the run's tasks itself (the
// ledger's fork count for bounded-processes): the command runs as uid 0,
// which RLIMIT_NPROC does not bound, with a process limit, and neither a
// pids cgroup nor the PID namespace's pid_max bounds it (a stock container
// run as root), unless the profile waives the guarantee.
func (in *Inputs) countsForks(f ledger.Facts) bool {
	return f.RootCommand && f.Seccomp && in.Limits.MaxProcs > 0 && !f.PidsCgroup && !f.PidMax && !in.pidsOptional
}
