// Package inside is the inner side of a bubblewrap run: a re-exec of the
// host binary inside bwrap that, on one locked OS thread, confines itself
// and then execve()s the command from that same thread, so the command
// starts already confined. (The other providers run the same confinement
// as prepared system calls, packages program and spawn.)
//
// Order matters: new session; credentials and capabilities; no_new_privs;
// Landlock; rlimits; seccomp (last, so its filter need not allow the set-up
// syscalls); fds >= 3 marked close-on-exec; exec. Any failure is reported on fd 4 as
// "CODE message" and the command never starts.
//
// Started by bwrap as the PID namespace's init, it does not become the
// command: it starts a second re-exec (Stage3Arg0) that does all of the
// above, and stays as the namespace's init (see initMain).
package inside

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/bwrap"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/rlimit"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// Stage3Arg0 marks the re-exec that stage-2 starts inside the namespaces
// (the landlock+namespaces provider): it does what stage-2 does without
// them.
const Stage3Arg0 = "confine-stage3"

// Main applies the plan read from fd 3 and execs the command. It returns
// only on failure, with the exit status to use. With plan.Namespaces set,
// stage-2 is the PID namespace's init instead (see initMain) and returns
// the command's status when it is over.
func Main() int {
	runtime.LockOSThread()
	inBwrap := os.Args[0] == bwrap.InitPath
	if inBwrap {
		if err := bwrapInit(); err != nil {
			fmt.Fprintf(os.NewFile(4, "status"), "%d %v", 125, err)
			return 125
		}
	}
	status := os.NewFile(4, "status")
	if status == nil {
		return 125
	}
	unix.CloseOnExec(4)
	in := os.NewFile(3, "plan")
	p, err := plan.Read(in)
	in.Close()
	if err != nil {
		fmt.Fprintf(status, "%d %v", 125, err)
		return 125
	}
	if os.Args[0] != Stage3Arg0 && inBwrap != (p.Namespaces != nil && p.Namespaces.Bwrap != "") {
		fmt.Fprintf(status, "%d %s", 125, "stage-2 started inside bubblewrap for a plan without it, or the other way round")
		return 125
	}
	if p.Namespaces != nil && os.Args[0] != Stage3Arg0 {
		return initMain(p, status)
	}
	code, err := apply(p)
	if err == nil {
		err = errors.New("exec returned without error")
		code = 125
	}
	fmt.Fprintf(status, "%d %v", code, err)
	return code
}

// bwrapInit prepares the descriptors of stage-2 started by bwrap (see
// package bwrap): the run's stderr back on fd 2 (fd 2 was bwrap's error
// pipe), the ready byte on the exit pipe, and everything above the exit
// pipe (the bound binary's descriptor) closed at exec.
func bwrapInit() error {
	if err := unix.Dup2(bwrap.StderrFD, 2); err != nil {
		return fmt.Errorf("bubblewrap init: stderr: %w", err)
	}
	if _, err := unix.Write(6, []byte{bwrap.Ready}); err != nil {
		return fmt.Errorf("bubblewrap init: exit pipe: %w", err)
	}
	if err := unix.CloseRange(bwrap.StderrFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("bubblewrap init: %w", err)
	}
	return nil
}

func apply(p *plan.Plan) (int, error) {
	parent := os.Getppid()

	if _, err := unix.Setsid(); err != nil {
		return 125, fmt.Errorf("setsid: %w", err)
	}
	if err := dropPrivileges(p.UID, p.GID); err != nil {
		return 125, err
	}
	// PR_SET_PDEATHSIG is cleared by a credential change; set it after.
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		return 125, fmt.Errorf("set parent-death signal: %w", err)
	}
	if os.Getppid() != parent {
		return 125, errors.New("supervisor died during set-up")
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 125, fmt.Errorf("no_new_privs: %w", err)
	}
	if err := unix.Chdir(p.Dir); err != nil {
		return 125, fmt.Errorf("working directory %s: %w", p.Dir, err)
	}

	rs, err := landlock.Prepare(landlock.FromPlan(p.Landlock))
	if err != nil {
		return 125, fmt.Errorf("landlock: %w", err)
	}
	if err := rs.RestrictSelf(); err != nil {
		return 125, fmt.Errorf("landlock: %w", err)
	}
	rs.Close()

	arch, err := seccomp.NativeArch()
	if err != nil {
		return 125, fmt.Errorf("seccomp: %w", err)
	}
	// Only bubblewrap starts stage-2: the command is in a PID namespace.
	sc := p.Seccomp.Effective(true)
	prog, err := seccomp.Build(seccomp.FromPlan(arch, sc))
	if err != nil {
		return 125, fmt.Errorf("seccomp: %w", err)
	}
	// Limits come last: RLIMIT_AS below what a Go runtime reserves would
	// kill this process, not the command.
	if err := rlimit.Apply(p.Rlimits); err != nil {
		return 125, err
	}
	listener := sc.Listener()
	// Everything below runs under the filter: only close_range, sendmsg,
	// close, rt_sigaction and execve, all of which it allows.
	nfd, err := seccomp.Install(prog, listener)
	if err != nil {
		return 125, fmt.Errorf("seccomp: %w", err)
	}
	if listener {
		rights := unix.UnixRights(nfd)
		if err := unix.Sendmsg(5, []byte{0}, rights, nil, 0); err != nil {
			return 125, fmt.Errorf("hand over seccomp listener: %w", err)
		}
		unix.Close(nfd)
		unix.Close(5)
	}
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 125, fmt.Errorf("close inherited fds: %w", err)
	}
	// The supervisor ignores SIGINT and SIGHUP, and an ignored signal
	// stays ignored across exec: give the command the default actions.
	resetSignals(unix.SIGINT, unix.SIGHUP)
	err = syscall.Exec(p.Path, p.Argv, p.Env)
	switch {
	case errors.Is(err, unix.ENOENT):
		return 127, fmt.Errorf("%s: not found in the sandbox: %w", p.Path, err)
	default:
		return 126, fmt.Errorf("%s: cannot execute: %w", p.Path, err)
	}
}

// resetSignals sets sigs to their default action (SIG_DFL) for the exec
// that follows. The zeroed struct is a kernel sigaction with no handler,
// flags or mask on every architecture.
func resetSignals(sigs ...unix.Signal) {
	var sa [4]uint64
	for _, s := range sigs {
		_, _, _ = unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(s), uintptr(unsafe.Pointer(&sa[0])), 0, 8, 0, 0)
	}
}

// dropPrivileges leaves the calling thread (the one that will exec) with no
// capability in any of the five sets and, when uid/gid are >= 0, running as
// them. Credentials are per thread in Linux, which is exactly what is wanted:
// only this thread survives the exec.
func dropPrivileges(uid, gid int) error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	privileged := data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
	if privileged {
		// Lock root out of regaining capabilities at exec or on setuid.
		const bits = 1<<0 | 1<<1 | 1<<2 | 1<<3 | 1<<5 | 1<<6 // NOROOT, NO_SETUID_FIXUP (+locks), KEEP_CAPS_LOCKED
		if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_SECUREBITS, bits|1<<7, 0, 0, 0, 0); e != 0 {
			return fmt.Errorf("set securebits: %w", e)
		}
		for c := 0; ; c++ {
			if _, _, e := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); e != 0 {
				if e == unix.EINVAL {
					break
				}
				return fmt.Errorf("drop bounding capability %d: %w", c, e)
			}
		}
	}
	if gid >= 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 && privileged {
			return fmt.Errorf("setgroups: %w", e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); e != 0 {
			return fmt.Errorf("setresgid(%d): %w", gid, e)
		}
	}
	if uid >= 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); e != 0 {
			return fmt.Errorf("setresuid(%d): %w", uid, e)
		}
	}
	data = [2]unix.CapUserData{}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective|d.Permitted|d.Inheritable != 0 {
			return errors.New("capabilities remain after dropping them")
		}
	}
	return nil
}
