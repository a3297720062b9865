//go:build linux

// Package nsinit is the namespaces layer of the landlock+namespaces and
// bubblewrap providers: the namespaces the run's init is cloned into, how
// ids are mapped, and the mount namespace's layout (PlanLayout): an empty
// root holding only the run's roots, private tmpfs directories and a
// /proc of the new PID namespace. The launcher's prepared init (package
// program) carries the layout out with raw system calls; bubblewrap is
// given the same layout as options.
//
// The namespaces add to the Landlock + seccomp core, they replace none of
// it: every guarantee is still enforced inside by the same Landlock
// ruleset and seccomp filter (which also keeps the command from creating
// namespaces of its own).
package nsinit

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
)

// Flags are the namespaces the run's init is cloned into.
const Flags = unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNS |
	unix.CLONE_NEWNET | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// Hostname is the UTS namespace's host name.
const Hostname = "confine"

// DefaultPrivate returns the directories that get a fresh tmpfs the command
// may write (POSIX shared memory and semaphores live there). Nothing else
// of the host exists in the mount namespace but the run's roots (see
// PlanLayout).
func DefaultPrivate() []string { return []string{"/dev/shm"} }

// reservedPids are the pids the kernel skips when it wraps around
// (RESERVED_PIDS), also in a PID namespace.
const reservedPids = 300

// PidMax returns the pid_max for a PID namespace that may hold at least
// procs processes (at most procs+300: once the numbers wrap, the first
// 300 are skipped), or 0 when this kernel has no per-namespace pid_max
// (before 6.14) or the host's is lower.
func PidMax(procs int) int {
	if procs <= 0 || !perNamespacePidMax() {
		return 0
	}
	n := procs + reservedPids + 1
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0
	}
	host, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n > host {
		return 0
	}
	return n
}

// perNamespacePidMax: kernel.pid_max is per PID namespace since 6.14.
// The kernel's release does not change while it runs: asked once per
// process.
var perNamespacePidMax = sync.OnceValue(func() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	var major, minor int
	if _, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 6 || major == 6 && minor >= 14
})

// MaxTmpfsBytes caps each private tmpfs (it is memory, which RLIMIT_DATA
// does not count).
const MaxTmpfsBytes = 1 << 30

// Mappings returns the ids a supervisor running as euid/egid maps into the
// user namespace for a command that runs as uid/gid (-1: as the
// supervisor). Every id maps to itself. An unprivileged supervisor may map
// only its own ids, and must deny setgroups(2) to map its gid; root maps 0
// (the init then keeps its capabilities across exec) and the command's ids.
func Mappings(euid, egid, uid, gid int) (uids, gids []int, setgroups bool) {
	if euid != 0 {
		return []int{euid}, []int{egid}, false
	}
	uids, gids = []int{0}, []int{0}
	if uid > 0 {
		uids = append(uids, uid)
	}
	if gid > 0 {
		gids = append(gids, gid)
	}
	return uids, gids, true
}

// SysProcAttr is what a process is started with in a run's namespaces. It keeps
// CAP_SYS_ADMIN and CAP_NET_ADMIN of its user namespace across the exec as
// ambient capabilities when it is not root there; it drops the ambient set
// before it starts the command's child, which drops everything else.
func SysProcAttr(ns *plan.Namespaces) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{
		Cloneflags:                 Flags,
		Pdeathsig:                  syscall.SIGKILL,
		GidMappingsEnableSetgroups: ns.Setgroups,
		AmbientCaps:                []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN},
	}
	for _, id := range ns.UIDs {
		a.UidMappings = append(a.UidMappings, syscall.SysProcIDMap{ContainerID: id, HostID: id, Size: 1})
	}
	for _, id := range ns.GIDs {
		a.GidMappings = append(a.GidMappings, syscall.SysProcIDMap{ContainerID: id, HostID: id, Size: 1})
	}
	return a
}

// CloneWorks reports whether this process may create a user namespace,
// by starting a child in one that execs a path that does not exist: the
// clone either fails (EPERM under Docker's default seccomp profile or
// kernel.unprivileged_userns_clone=0, ENOSPC with user.max_user_namespaces=0)
// or the exec does (ENOENT), which proves the clone worked. It costs one
// fork, no program start.
func CloneWorks() error {
	attr := &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER}}
	pid, err := syscall.ForkExec("/nonexistent/confine-userns-probe", []string{"confine-userns-probe"}, attr)
	if err == nil {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, 0, nil)
		return nil
	}
	if errors.Is(err, syscall.ENOENT) {
		return nil
	}
	return fmt.Errorf("clone(CLONE_NEWUSER): %w", err)
}
