package plan

// MaxTasks is the bound the supervisor keeps on the run's tasks: the
// process limit when Seccomp.NotifyFork is set, else 0 (none).
func (p *Plan) MaxTasks() int {
	if !p.Seccomp.NotifyFork {
		return 0
	}
	return int(p.Rlimits.NProc)
}
