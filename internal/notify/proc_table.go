//go:build linux && (amd64 || arm64)

package notify

import "golang.org/x/sys/unix"

// procSyscalls are the calls of proc_targets.go; the filter routes them
// here under seccomp.Config.NotifyProcTargets and NotifySignals.
var procSyscalls = map[int32]sysEntry{
	unix.SYS_PRLIMIT64:          {"prlimit64", sysPrlimit},
	unix.SYS_SCHED_SETAFFINITY:  {"sched_setaffinity", sysSchedPid},
	unix.SYS_SCHED_SETSCHEDULER: {"sched_setscheduler", sysSchedPid},
	unix.SYS_SCHED_SETPARAM:     {"sched_setparam", sysSchedPid},
	unix.SYS_SCHED_SETATTR:      {"sched_setattr", sysSchedPid},
	unix.SYS_MIGRATE_PAGES:      {"migrate_pages", sysMemPid},
	unix.SYS_MOVE_PAGES:         {"move_pages", sysMemPid},
	unix.SYS_SETPRIORITY:        {"setpriority", sysSetpriority},
	unix.SYS_IOPRIO_SET:         {"ioprio_set", sysIoprioSet},
	unix.SYS_KILL:               {"kill", sysKill},
	unix.SYS_TKILL:              {"tkill", sysTkill},
	unix.SYS_TGKILL:             {"tgkill", sysTgkill},
	unix.SYS_RT_SIGQUEUEINFO:    {"rt_sigqueueinfo", sysRtSigqueueinfo},
	unix.SYS_RT_TGSIGQUEUEINFO:  {"rt_tgsigqueueinfo", sysRtTgsigqueueinfo},
	unix.SYS_PIDFD_SEND_SIGNAL:  {"pidfd_send_signal", sysPidfdSendSignal},
	unix.SYS_FCNTL:              {"fcntl", sysFcntl},
}

func init() {
	for nr, e := range procSyscalls {
		sysTable[nr] = e
	}
}
