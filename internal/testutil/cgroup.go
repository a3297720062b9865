//go:build linux

package testutil

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/internal/host"
	"golang.org/x/sys/unix"
)

// ReadOnlyCgroupEnv, set to 1 in the environment of a process whose
// TestMain calls WrapContainer, re-executes it in a private mount
// namespace where every cgroup mount is read-only, as in a stock Docker
// container: no pids cgroup can be made there, so a run as uid 0 must
// bound its processes otherwise. The simulated container (see
// SimulateContainerEnv) does the same for every process it wraps. It
// takes root; a process of another uid cannot remount anything, and never
// makes a pids cgroup (RLIMIT_NPROC bounds it), but in a hierarchy
// delegated to it (systemd's user@UID.service, cgroup v2) it could make a
// memory cgroup: it goes without one (host.NoMemoryCgroupEnv), as it
// would with the mounts read-only. Nothing in a release binary reads it:
// it only takes a power away from the process.
const ReadOnlyCgroupEnv = "CONFINE_TEST_RO_CGROUP"

// wrapReadOnlyCgroup does what ReadOnlyCgroupEnv asks, or, with sim, what
// the simulated container asks; it returns only when there is nothing to
// do (or it was done before the re-exec that got here).
func wrapReadOnlyCgroup(sim bool) {
	v := os.Getenv(ReadOnlyCgroupEnv)
	if (v == "1" || sim) && os.Geteuid() != 0 {
		_ = os.Setenv(host.NoMemoryCgroupEnv, "1")
	}
	if v == "done" || (v != "1" && !sim) || os.Geteuid() != 0 {
		return
	}
	if cgroupsReadOnly() {
		// Already so (a real Docker container): nothing to take away,
		// and no right to make a mount namespace anyway.
		return
	}
	reexecAfter("read-only cgroups", ReadOnlyCgroupEnv, readOnlyCgroups)
}

// cgroupMount is one mount of cgroupMounts.
type cgroupMount struct {
	cgroup, ro bool // a cgroup or cgroup2 file system; mounted read-only
}

// cgroupMounts lists the mount points of every cgroup and cgroup2 mount and
// of /sys/fs/cgroup (often a tmpfs holding the v1 hierarchies).
func cgroupMounts() (map[string]cgroupMount, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ms := map[string]cgroupMount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// device mountpoint fstype options 0 0
		fs := strings.Fields(sc.Text())
		if len(fs) >= 4 && (fs[2] == "cgroup" || fs[2] == "cgroup2" || fs[1] == "/sys/fs/cgroup") {
			ms[fs[1]] = cgroupMount{cgroup: fs[2] == "cgroup" || fs[2] == "cgroup2", ro: slices.Contains(strings.Split(fs[3], ","), "ro")}
		}
	}
	return ms, sc.Err()
}

// cgroupsReadOnly reports whether every cgroup file system is mounted
// read-only already (a tmpfs above them may be writable: no cgroup can be
// made in it).
func cgroupsReadOnly() bool {
	ms, err := cgroupMounts()
	if err != nil {
		return false
	}
	for _, m := range ms {
		if m.cgroup && !m.ro {
			return false
		}
	}
	return true
}

// readOnlyCgroups moves the calling thread into a new mount namespace and
// remounts every cgroup and cgroup2 mount, and /sys/fs/cgroup itself,
// read-only there. The caller must exec from this thread.
func readOnlyCgroups() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	ms, err := cgroupMounts()
	if err != nil {
		return err
	}
	for t := range ms {
		if err := unix.Mount("", t, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			return fmt.Errorf("remount %s read-only: %w", t, err)
		}
	}
	return nil
}
