//go:build linux

package seccomp

import (
	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// A call the supervisor decides waits for it, and a signal that arrives
// before the supervisor has received the notification ends the wait with
// ERESTARTSYS (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV protects only what
// follows the receipt). The kernel restarts the call when the signal's
// handler has SA_RESTART and turns it into EINTR when it has not. fork,
// clone and kill never fail with EINTR otherwise, and dash, /bin/sh on
// Debian and Ubuntu, installs its SIGCHLD handler without SA_RESTART: a
// child exiting while the shell forks the next one made it print "Cannot
// fork" (about 4% of such forks on a loaded host).
//
// So where forks or signals go to the supervisor, installing a SIGCHLD
// handler goes there too, and the supervisor adds SA_RESTART to it
// (internal/notify, sigaction.go). That changes one thing the program can
// see: slow calls (read on a pipe, wait4) interrupted by a SIGCHLD handler
// resume instead of failing with EINTR, which is what glibc's signal() and
// bash ask for anyway. Only SIGCHLD: it is the signal a process that forks
// keeps receiving; handlers of other signals keep their flags.

// restartsSigchld says whether cfg sends SIGCHLD handler installs to the
// supervisor.
func restartsSigchld(cfg plan.Seccomp) bool { return cfg.NotifyFork || cfg.NotifySignals }

// sigchldEntry is rt_sigaction(SIGCHLD, act != NULL, ...): notified; every
// other rt_sigaction is allowed.
func sigchldEntry() entry {
	r := when(unix.SECCOMP_RET_USER_NOTIF,
		is(arg{i: 0, name: "signum"}, named{uint32(unix.SIGCHLD), "SIGCHLD"}),
		notNil(arg{i: 1, name: "act"})).noting("the supervisor adds SA_RESTART")
	return entry{name: "rt_sigaction", rules: []argRule{r}, ret: unix.SECCOMP_RET_ALLOW}
}
