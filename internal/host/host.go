// Package host probes what this kernel and process can enforce. The answers
// decide, per guarantee, which mechanism enforces it or whether the run must
// be refused.
package host

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// Info is what the probe found.
type Info struct {
	LandlockABI    int    `json:"landlock_abi"`
	LandlockErrata int    `json:"landlock_errata"`
	LandlockErr    string `json:"landlock_error,omitempty"`
	Seccomp        bool   `json:"seccomp"`
	SeccompErr     string `json:"seccomp_error,omitempty"`
	UserNS         bool   `json:"user_namespaces"`
	IOUring        bool   `json:"io_uring_present"`
	CgroupV2       bool   `json:"cgroup_v2_delegated"`
	// PidsCgroupRoot is a writable pids-controller hierarchy, when one exists.
	PidsCgroupRoot string `json:"pids_cgroup_root,omitempty"`
	EUID           int    `json:"euid"`
	Bwrap          string `json:"bwrap,omitempty"`
}

var (
	once   sync.Once
	cached Info
)

// Probe returns the host facts the launch path needs; kernel facts are
// probed once per process.
func Probe() Info {
	once.Do(func() { cached = probe() })
	i := cached
	i.EUID = os.Geteuid()
	return i
}

// ProbeAll adds the facts only reports need (user namespaces cost a
// process spawn to test).
func ProbeAll() Info {
	i := Probe()
	i.UserNS = userNSWorks()
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
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.subtree_control"); err == nil {
		i.CgroupV2 = unix.Access("/sys/fs/cgroup", unix.W_OK) == nil
	}
	if p, err := exec.LookPath("bwrap"); err == nil {
		i.Bwrap = p
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

// UserNSProbeArg0 marks a re-exec that only proves a user namespace could
// be created; the launch package exits it at once.
const UserNSProbeArg0 = "confine-userns-probe"

// userNSWorks reports whether an unprivileged user namespace can be made,
// by trying in a throwaway child (unshare in this process would be
// irreversible).
func userNSWorks() bool {
	if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && string(b) == "0\n" {
		return false
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{UserNSProbeArg0}
	cmd.SysProcAttr = &unix.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}
	return cmd.Run() == nil
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

// NewPidsCgroup creates a per-run pids cgroup limited to max tasks.
func NewPidsCgroup(root, name string, max int64) (string, error) {
	if root == "" {
		return "", errors.New("no writable pids cgroup hierarchy")
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "pids.max"), []byte(strconv.FormatInt(max, 10)), 0); err != nil {
		_ = os.Remove(dir)
		return "", err
	}
	return dir, nil
}

// RemoveCgroup removes a per-run cgroup once it is empty.
func RemoveCgroup(dir string) error {
	if dir == "" {
		return nil
	}
	return os.Remove(dir)
}
