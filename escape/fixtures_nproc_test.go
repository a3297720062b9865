//go:build linux

package escape

import "github.com/confine-sandbox/confine/internal/testutil"

// nprocVectors attack bounded-processes where a run as uid 0 cannot get a
// pids cgroup: the confined CLI runs with every cgroup mount read-only,
// as Docker mounts them (testutil.ReadOnlyCgroupEnv), and under the core
// unless the pass asks for another backend. As root the supervisor's fork
// count is then the only bound (uid 0 is exempt from RLIMIT_NPROC); as
// uid 65534 RLIMIT_NPROC is, and the rows check it the same way. Both
// bound the run exactly, so fork-race may hold at most --max-procs tasks.
// The controls are capped: fork-bomb makes 20 processes, fork-race 64
// children, enough to pass the confined runs' limit of 64.
func nprocVectors() []vcase {
	confined := func(e *env, args ...string) fixture {
		cli := []string{"--max-procs", "64"}
		if e.backend == "" {
			cli = append(cli, "--backend", "core")
		}
		return fixture{args: args, cliArgs: cli, env: []string{testutil.ReadOnlyCgroupEnv + "=1"}, mustReport: true}
	}
	return []vcase{
		{name: "fork-bomb-no-pids-cgroup", vector: "fork-bomb", ownUID: true, setup: func(e *env) fixture {
			if e.confined {
				return confined(e, "100000")
			}
			return fixture{args: []string{"20"}}
		}},
		// Forks from several processes at once: decisions taken in
		// parallel must not pass on the same count.
		{name: "fork-race-no-pids-cgroup", vector: "fork-race", ownUID: true, setup: func(e *env) fixture {
			if e.confined {
				return confined(e, "64", "8")
			}
			return fixture{args: []string{"64", "8"}}
		}},
		// The core with the cgroups as the host has them: as root a pids
		// cgroup where one can be made, which holds the init too and so
		// allows --max-procs + 16 tasks (build.go), the fork count where
		// none can; RLIMIT_NPROC otherwise. On cgroup v2 the command
		// leaves the pids cgroup for its memory cgroup (a process is in
		// one cgroup only there), which must carry the bound with it.
		{name: "fork-race-core", vector: "fork-race", setup: func(e *env) fixture {
			if e.user.UID != 0 {
				// RLIMIT_NPROC counts every task of the uid, the test's and
				// the launcher's threads too: as uid 1000 in the cgroup v2
				// boot the probe could not even start its threads.
				e.t.Skipf("not applicable as %s: this row attacks uid 0's bounds (pids cgroup, fork count); RLIMIT_NPROC, a non-root uid's, is fork-race-no-pids-cgroup's", e.user.Name)
			}
			if e.confined {
				f := confined(e, "80", "8")
				f.env = nil
				return f
			}
			return fixture{args: []string{"80", "8"}}
		}},
	}
}
