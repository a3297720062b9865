//go:build linux

// Package host probes what this kernel and process can enforce. The answers
// decide, per guarantee, which mechanism enforces it or whether the run must
// be refused.
package host

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/bwrap"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// Info is what the probe found.
type Info struct {
	LandlockABI    int    `json:"landlock_abi"`
	LandlockErrata int    `json:"landlock_errata"`
	LandlockErr    string `json:"landlock_error,omitempty"`
	Seccomp        bool   `json:"seccomp"`
	SeccompErr     string `json:"seccomp_error,omitempty"`
	// UserNS says a user namespace can be created (Probe: nothing rules
	// it out, and a run falls back when its clone fails; ProbeAll: the
	// whole namespace set-up works), and UserNSErr why not.
	UserNS    bool   `json:"user_namespaces"`
	UserNSErr string `json:"user_namespaces_error,omitempty"`
	IOUring   bool   `json:"io_uring_present"`
	CgroupV2  bool   `json:"cgroup_v2_delegated"`
	// PidsCgroupRoot is a writable pids-controller hierarchy, when one exists.
	PidsCgroupRoot string `json:"pids_cgroup_root,omitempty"`
	// MemoryCgroup is where a run's memory cgroup can be made (Parent ""
	// for nowhere: the run's memory is then bounded per process).
	MemoryCgroup MemoryCgroup `json:"memory_cgroup"`
	EUID         int          `json:"euid"`
	// Bwrap is the bubblewrap binary found on PATH. BwrapChecked says
	// ProbeBwrap ran it, and BwrapErr why it cannot create its
	// namespaces here ("" when it can).
	Bwrap        string `json:"bwrap,omitempty"`
	BwrapChecked bool   `json:"bwrap_checked,omitempty"`
	BwrapErr     string `json:"bwrap_error,omitempty"`
}

// NoMemoryCgroupEnv, set to 1 in the launcher's environment, makes runs
// go without a memory cgroup even where one could be made: each process
// is then bounded on its own (RLIMIT_DATA), and results say so
// (memory_bound "rlimit-data"). For comparisons (the benchmark) and hosts
// whose cgroup manager must not see children appear.
const NoMemoryCgroupEnv = "CONFINE_NO_MEMORY_CGROUP"

var (
	once   sync.Once
	cached Info

	bwrapOnce sync.Once
	bwrapErr  error
)

// Probe returns the host facts the launch path needs; kernel facts are
// probed once per process.
func Probe() Info {
	once.Do(func() { cached = probe() })
	i := cached
	i.EUID = os.Geteuid()
	return i
}

// ProbeAll adds the facts only reports need: whether a clone into new
// namespaces works, and bwrap's probe. Whether the whole namespace set-up
// works is learned by a real run (confine.ProbeNamespaces, which the
// CLI's reports use), so that the probe is the program runs execute.
func ProbeAll() Info {
	i := ProbeBwrap(Probe())
	if i.UserNS {
		if err := nsinit.CloneWorks(); err != nil {
			i.UserNS, i.UserNSErr = false, ExplainNamespaceFailure(err.Error())
		}
	}
	return i
}

// ProbeBwrap adds whether bwrap, when installed, can create its
// namespaces here (one bwrap start, cached per process). Only runs that
// ask for the bubblewrap backend, and reports, pay for it: it is never
// selected automatically.
func ProbeBwrap(i Info) Info {
	if i.Bwrap == "" {
		return i
	}
	bwrapOnce.Do(func() { bwrapErr = bwrap.Probe(i.Bwrap) })
	i.BwrapChecked = true
	if bwrapErr != nil {
		i.BwrapErr = bwrapErr.Error()
	}
	return i
}

func probe() Info {
	var i Info
	abi, errata, err := landlock.ABI()
	if err != nil {
		i.LandlockErr = err.Error()
	} else {
		i.LandlockABI, i.LandlockErrata = abi, errata
	}
	if err := seccomp.Probe(); err != nil {
		i.SeccompErr = err.Error()
	} else {
		i.Seccomp = true
	}
	i.IOUring = ioUringPresent()
	i.PidsCgroupRoot = pidsCgroupRoot()
	if os.Getenv(NoMemoryCgroupEnv) != "1" {
		i.MemoryCgroup, _ = memoryCgroup()
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.subtree_control"); err == nil {
		i.CgroupV2 = unix.Access("/sys/fs/cgroup", unix.W_OK) == nil
	}
	if p, err := exec.LookPath("bwrap"); err == nil {
		i.Bwrap = p
	}
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
		i.UserNSErr = "user.max_user_namespaces is 0"
	} else {
		// Not known to fail: a run tries the clone itself and falls back
		// to the core provider when it fails (its result says why), which
		// costs nothing when it works. Reports clone a probe (ProbeAll).
		i.UserNS = true
	}
	return i
}

func ioUringPresent() bool {
	if b, err := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); err == nil {
		return len(b) > 0 && b[0] != '2'
	}
	// io_uring_setup(0, NULL) fails with EFAULT/EINVAL when present.
	_, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, 0, 0, 0)
	return e != unix.ENOSYS
}

// pidsCgroupRoot finds a pids-controller hierarchy this process may create
// children in: cgroup v1's pids mount or a v2 hierarchy with pids enabled.
func pidsCgroupRoot() string {
	for _, c := range []string{"/sys/fs/cgroup/pids", "/sys/fs/cgroup"} {
		if _, err := os.Stat(filepath.Join(c, "cgroup.procs")); err != nil {
			continue
		}
		if c == "/sys/fs/cgroup" {
			b, err := os.ReadFile(filepath.Join(c, "cgroup.subtree_control"))
			if err != nil || !containsWord(string(b), "pids") {
				continue
			}
		}
		if unix.Access(c, unix.W_OK) == nil {
			return c
		}
	}
	return ""
}

func containsWord(s, w string) bool {
	for len(s) > 0 {
		i := 0
		for i < len(s) && s[i] != ' ' && s[i] != '\n' {
			i++
		}
		if s[:i] == w {
			return true
		}
		if i == len(s) {
			break
		}
		s = s[i+1:]
	}
	return false
}

// CreatePidsCgroup creates the per-run pids cgroup dir limited to max
// tasks.
func CreatePidsCgroup(dir string, max int64) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		_ = os.Remove(dir)
		return err
	}
	return nil
}

// PidsCgroupV1 reports whether the per-run pids cgroup dir lies in a
// cgroup v1 hierarchy, where a thread can join alone (a tasks file); v2
// has only cgroup.procs, which moves the whole process.
func PidsCgroupV1(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, "tasks"))
	return err == nil
}

// RemoveCgroup removes a per-run cgroup once it is empty.
func RemoveCgroup(dir string) error {
	if dir == "" {
		return nil
	}
	return os.Remove(dir)
}
