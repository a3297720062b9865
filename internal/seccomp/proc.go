//go:build linux

package seccomp

import (
	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// Calls that act on another process named by a pid, a process group, a
// uid or a pidfd. Without a PID namespace (the core backend) nothing but
// these rules and the supervisor's handlers (internal/notify) keeps them
// inside the run: Landlock's signal scope (ABI 6) covers signals only, and
// no Landlock ABI covers resource limits, scheduling or I/O priority.
//
// Each call of the kernel's table that names another process is listed in
// procCalls with what the filter does and why, so that the decision is
// data and a test walks it. The filter decides from registers alone where
// it can (pid 0 means the caller: allowed without a notification, so
// glibc's setrlimit, nice() and sched_setaffinity(0, ...) cost nothing);
// only calls naming some other pid reach the supervisor.

// procAction is what the filter does with a call of procCalls.
type procAction int

const (
	// procNone: no rule; the reason says what already bounds the call.
	procNone procAction = iota
	// procPid: the pid in argument 0 is the caller when 0 (allowed),
	// otherwise the supervisor decides (plan.Seccomp.NotifyProcTargets).
	procPid
	// procWhich: setpriority/ioprio_set(which, who, ...): a process with
	// who 0 is the caller and a process group with who 0 the caller's
	// own (allowed); another process goes to the supervisor; another
	// group and every "user" target fail with EPERM (NotifyProcTargets).
	procWhich
	// procDeny fails with EPERM under NotifyProcTargets.
	procDeny
	// procSignal goes to the supervisor under plan.Seccomp.NotifySignals (kill
	// with pid 0, the caller's own process group, is allowed).
	procSignal
)

// procCall is one row of procCalls.
type procCall struct {
	name   string
	action procAction
	why    string
}

// procCalls lists every system call that names another process, with the
// filter's decision. Calls with procNone have no rule and no number in the
// tables unless another rule needs one.
var procCalls = []procCall{
	// Resource limits, scheduling, priority, memory placement: no LSM
	// hook Landlock implements covers them.
	{"prlimit64", procPid, "setting a limit of another process can kill it (RLIMIT_CPU, RLIMIT_NOFILE...)"},
	{"sched_setaffinity", procPid, "pins another process to CPUs"},
	{"sched_setscheduler", procPid, "changes another process's scheduling policy"},
	{"sched_setparam", procPid, "changes another process's scheduling priority"},
	{"sched_setattr", procPid, "changes another process's scheduling attributes"},
	{"setpriority", procWhich, "renices another process; PRIO_USER reaches every process of the uid"},
	{"ioprio_set", procWhich, "changes another process's I/O priority; IOPRIO_WHO_USER reaches every process of the uid"},
	{"migrate_pages", procPid, "moves another process's memory between NUMA nodes (Landlock's ptrace rule also refuses it)"},
	{"move_pages", procPid, "moves another process's pages (Landlock's ptrace rule also refuses it)"},
	{"process_mrelease", procDeny, "reaps the memory of another (dying) process named by a pidfd; no permission check beyond the pidfd"},
	// Signals: Landlock's scope (ABI 6) covers them; below ABI 6 the
	// supervisor does.
	{"kill", procSignal, "signals a process, a process group or every process (-1)"},
	{"tkill", procSignal, "signals a thread by tid"},
	{"tgkill", procSignal, "signals a thread of a thread group"},
	{"rt_sigqueueinfo", procSignal, "queues a signal with data to a process"},
	{"rt_tgsigqueueinfo", procSignal, "queues a signal with data to a thread"},
	{"pidfd_send_signal", procSignal, "signals the process behind a pidfd (or a /proc/PID directory fd)"},
	{"fcntl", procSignal, "F_SETOWN names the process (group) that gets SIGIO/SIGURG; F_SETOWN_EX (a struct in memory) fails with EPERM"},
	// Already refused outright (epermCalls) or bounded otherwise.
	{"ptrace", procNone, "EPERM (epermCalls)"},
	{"process_vm_readv", procNone, "EPERM (epermCalls)"},
	{"process_vm_writev", procNone, "EPERM (epermCalls)"},
	{"process_madvise", procNone, "EPERM (epermCalls)"},
	{"pidfd_getfd", procNone, "EPERM (epermCalls)"},
	{"perf_event_open", procNone, "EPERM (epermCalls)"},
	{"setns", procNone, "EPERM (epermCalls)"},
	{"pidfd_open", procNone, "only returns a handle; what it can be used for is covered: signals (pidfd_send_signal), pidfd_getfd, process_madvise, setns and process_mrelease above, waitid only for own children"},
	{"kcmp", procNone, "compares kernel objects only, under a ptrace-mode check Landlock restricts to the run's domain on every ABI"},
	{"get_robust_list", procNone, "reads a pointer only, under a ptrace-mode check Landlock restricts on every ABI"},
	{"setpgid", procNone, "the kernel allows only the caller and its own children, within the caller's session (a run has its own)"},
	{"capset", procNone, "the kernel refuses any pid but the caller's"},
	{"waitid", procNone, "waits for own children only"},
	{"wait4", procNone, "waits for own children only"},
	{"sched_getaffinity", procNone, "reads only (the same as /proc/PID/status)"},
	{"sched_getscheduler", procNone, "reads only"},
	{"sched_getparam", procNone, "reads only"},
	{"sched_getattr", procNone, "reads only"},
	{"sched_rr_get_interval", procNone, "reads only"},
	{"getpriority", procNone, "reads only"},
	{"ioprio_get", procNone, "reads only"},
	{"getpgid", procNone, "reads only"},
	{"getsid", procNone, "reads only"},
	{"capget", procNone, "reads only"},
}

// Values the process rules compare against (the same on amd64 and arm64).
const (
	prioProcess      = 0 // PRIO_PROCESS
	prioPgrp         = 1 // PRIO_PGRP
	prioUser         = 2 // PRIO_USER
	ioprioWhoProcess = 1 // IOPRIO_WHO_PROCESS
	ioprioWhoPgrp    = 2 // IOPRIO_WHO_PGRP
	ioprioWhoUser    = 3 // IOPRIO_WHO_USER
	fSetown          = unix.F_SETOWN
	fSetownEx        = unix.F_SETOWN_EX
	fioSetown        = 0x8901 // FIOSETOWN: ioctl form of F_SETOWN
	siocSpgrp        = 0x8902 // SIOCSPGRP: the same for sockets
)

// procEntries returns the filter entries of procCalls that cfg turns on.
func procEntries(cfg plan.Seccomp) []entry {
	notify := uint32(unix.SECCOMP_RET_USER_NOTIF)
	eperm := errno(unix.EPERM)
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	// pid 0 is the caller: allowed; anything else notifies.
	pidZero := []argRule{when(notify, isNot(arg{i: 0, name: "pid"}, num(0)))}
	var es []entry
	for _, c := range procCalls {
		switch {
		case c.action == procPid && cfg.NotifyProcTargets:
			es = append(es, entry{name: c.name, rules: pidZero, ret: allow})
		case c.action == procWhich && cfg.NotifyProcTargets:
			es = append(es, entry{name: c.name, rules: whichRules(c.name), ret: allow})
		case c.action == procDeny && cfg.NotifyProcTargets:
			es = append(es, entry{name: c.name, ret: eperm})
		case c.action == procSignal && cfg.NotifySignals:
			switch c.name {
			case "kill":
				es = append(es, entry{name: c.name, rules: pidZero, ret: allow})
			case "fcntl":
				cmd := arg{i: 1, name: "cmd"}
				es = append(es, entry{name: c.name, rules: []argRule{
					when(notify, is(cmd, named{fSetown, "F_SETOWN"}), isNot(arg{i: 2, name: "arg"}, num(0))),
					when(eperm, is(cmd, named{fSetownEx, "F_SETOWN_EX"})),
				}, ret: allow})
			default:
				es = append(es, entry{name: c.name, ret: notify})
			}
		}
	}
	return es
}

// whichRules are setpriority's and ioprio_set's (which, who, ...): a
// process with who 0 is the caller and a process group with who 0 the
// caller's own (allowed); another process goes to the supervisor; another
// group and every "user" target fail with EPERM. Any other "which" fails
// with EINVAL in the kernel.
func whichRules(call string) []argRule {
	p, g, u := named{prioProcess, "PRIO_PROCESS"}, named{prioPgrp, "PRIO_PGRP"}, named{prioUser, "PRIO_USER"}
	if call == "ioprio_set" {
		p, g, u = named{ioprioWhoProcess, "IOPRIO_WHO_PROCESS"}, named{ioprioWhoPgrp, "IOPRIO_WHO_PGRP"}, named{ioprioWhoUser, "IOPRIO_WHO_USER"}
	}
	which, who := arg{i: 0, name: "which"}, isNot(arg{i: 1, name: "who"}, num(0))
	return []argRule{
		when(errno(unix.EPERM), is(which, u)),
		when(errno(unix.EPERM), is(which, g), who),
		when(unix.SECCOMP_RET_USER_NOTIF, is(which, p), who),
	}
}
