//go:build linux

// Package reaper is what a core run's init becomes when its launcher died
// (package spawn, Program.SetGoneJanitor): a re-exec of the host binary
// that is still the child subreaper of the command's tree (the attribute
// survives execve), kills every descendant until none is left, then
// removes the run's private directory, pids cgroup and memory cgroup.
package reaper

import (
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/proctree"
	"github.com/confine-sandbox/confine/internal/tmpdir"
)

// Arg0 marks the re-exec. Its arguments are the private directory, the
// pids cgroup and the memory cgroup ("" for none).
const Arg0 = "confine-reaper"

// Main kills the tree and cleans up; it returns the exit status.
func Main() int {
	if len(os.Args) != 4 {
		return 2
	}
	// Not proctree.Supervise: this process sits in the run's pids cgroup,
	// which a fork bomb may have filled, so it must not need another
	// thread. One goroutine reaps without blocking (a blocking wait4
	// would make the runtime start a thread) and sweeps on the ticks.
	end := proctree.EndTree(os.Getpid(), 0)
	defer end.Stop()
	end.Kill()
	for {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG|unix.WALL, nil)
			if err == unix.ECHILD {
				return cleanup(os.Args[1], os.Args[2], os.Args[3])
			}
			if err != nil && err != unix.EINTR || pid == 0 {
				break
			}
		}
		// Whatever was still being killed or forked is reparented here
		// and found by the next sweep.
		<-end.Tick()
		end.Sweep()
	}
}

func cleanup(dir string, cgroups ...string) int {
	tmpdir.Remove(dir)
	for _, cg := range cgroups {
		if cg != "" {
			// This process is in the cgroup: out ("0": the writer) first.
			_ = os.WriteFile(filepath.Join(filepath.Dir(cg), "cgroup.procs"), []byte("0"), 0)
			_ = os.Remove(cg)
		}
	}
	return 0
}
