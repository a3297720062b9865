//go:build linux

package escape

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	fx "github.com/confine-sandbox/confine/internal/fixture"
)

// Calls that act on another process by pid, process group, uid or pidfd
// (issue 10, point 2): resource limits, scheduling, priority, I/O
// priority, and every way of sending a signal. Each row attacks a process
// the test started outside the run, as the same user.
//
// The rows run the confined phase under the core (no PID namespace: the
// target is visible, so only the filter and the supervisor stand in the
// way), unless the table runs under another backend (TestEscapeBwrap);
// the "-auto" twins under the backend confine picks.
// With a simulated Landlock ABI below 6 (-tags confine_simabi), the
// signal rows test the supervisor's handlers instead of Landlock's scope.

// simABIEnv is landlock's test-only variable (internal/landlock SimEnv,
// defined in confine_simabi builds only); the CLI is handed it so that
// the run sees the ABI this test process sees.
const simABIEnv = "CONFINE_SIM_LANDLOCK_ABI"

// startVictim starts `sleep 300` as uid, in a process group of its own
// when pgrp is set (so that a group signal can reach nothing else of the
// test's).
func (e *env) startVictim(uid int, pgrp bool) *fx.Victim {
	e.t.Helper()
	if os.Geteuid() != 0 {
		uid = -1
	}
	v, err := fx.StartSleep([]string{controlPATH}, uid, pgrp, e.t.Cleanup)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// procFixture completes a fixture for these rows with coreRun and
// mustReport (a refused run fails the row instead of passing it).
func procFixture(e *env, f fixture) fixture {
	f.mustReport = !f.probeMayEscape
	if !e.confined {
		return f
	}
	args, env := coreRun(e)
	f.cliArgs = append(f.cliArgs, args...)
	f.env = append(f.env, env...)
	return f
}

// coreRun returns the CLI flags and environment of a confined run of
// these tests: the simulated ABI passed on, and the core backend when no
// other is asked for. No guarantee is waived: below ABI 6 the ledger holds
// no-foreign-signals by the supervisor's mechanism these rows attack.
func coreRun(e *env) (args, envv []string) {
	if v := os.Getenv(simABIEnv); v != "" {
		envv = append(envv, simABIEnv+"="+v)
	}
	if e.backend != "" {
		return nil, envv
	}
	return []string{"--backend", "core"}, envv
}

// procLine reads a "Key:" line of /proc/PID/status or a row of
// /proc/PID/limits.
func procLine(pid int, file, prefix string) (string, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/%s", pid, file))
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	return "", fmt.Errorf("no %q in /proc/%d/%s", prefix, pid, file)
}

// nice reads the nice value of pid from /proc/PID/stat.
func nice(pid int) (int, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if i < 0 || len(f) < 17 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[16])
}

// changed is the effect "what read returns is no longer before".
func changed(what string, before string, read func() (string, error)) func() (bool, string) {
	return func() (bool, string) {
		now, err := read()
		if err != nil {
			return false, fmt.Sprintf("%s: %v", what, err)
		}
		if now != before {
			return true, fmt.Sprintf("%s changed from %q to %q", what, before, now)
		}
		return false, fmt.Sprintf("%s still %q", what, before)
	}
}

// procTargetVectors are the rows; vectors() appends them.
func procTargetVectors() []vcase {
	pidArg := func(v *fx.Victim) []string { return []string{strconv.Itoa(v.Pid)} }
	// attribute rows: the victim's state before, and how to read it. The
	// "-auto" twin runs under the backend confine picks (namespaces where
	// they work), the plain row under the core.
	attr := func(name, vector, what string, read func(pid int) (string, error)) []vcase {
		row := func(name string, auto bool) vcase {
			return vcase{name: name, vector: vector, setup: func(e *env) fixture {
				v := e.startVictim(e.user.UID, false)
				r := func() (string, error) { return read(v.Pid) }
				before, err := r()
				if err != nil {
					e.t.Fatalf("%s of the target: %v", what, err)
				}
				f := fixture{args: pidArg(v), effect: changed(what, before, r), intact: v.Check, mustReport: true}
				if auto {
					return f
				}
				return procFixture(e, f)
			}}
		}
		return []vcase{row(name, false), row(name+"-auto", true)}
	}
	// signal rows: SIGUSR1 (or SIGIO) ends the victim.
	signal := func(name, vector string, pgrp bool, mayEscape bool) vcase {
		return vcase{name: name, vector: vector, setup: func(e *env) fixture {
			v := e.startVictim(e.user.UID, pgrp)
			return procFixture(e, fixture{args: pidArg(v), effect: v.Ended(e.settle()), intact: v.Check, probeMayEscape: mayEscape})
		}}
	}
	// PRIO_USER renices every process of a uid. Only root can aim it at a
	// uid no one else on this shared host runs as.
	userRow := func(name string, auto bool) vcase {
		return vcase{name: name, vector: "setpriority-user", setup: func(e *env) fixture {
			if os.Geteuid() != 0 || e.user.UID != 0 {
				e.t.Skipf("not applicable as %s: PRIO_USER would renice every process of uid %d on this host, not only the test's", e.user.Name, e.user.UID)
			}
			const lonely = 61234
			v := e.startVictim(lonely, false)
			r := func() (string, error) { n, err := nice(v.Pid); return strconv.Itoa(n), err }
			before, err := r()
			if err != nil {
				e.t.Fatal(err)
			}
			f := fixture{args: []string{strconv.Itoa(lonely)}, effect: changed("nice value of a uid-61234 process", before, r), intact: v.Check, mustReport: true}
			if auto {
				return f
			}
			return procFixture(e, f)
		}}
	}
	var rows []vcase
	rows = append(rows, attr("prlimit-foreign", "prlimit", "soft RLIMIT_NOFILE", func(pid int) (string, error) {
		l, err := procLine(pid, "limits", "Max open files")
		if f := strings.Fields(l); err == nil && len(f) > 0 {
			return f[0], nil
		}
		return l, err
	})...)
	rows = append(rows, attr("setaffinity-foreign", "setaffinity", "Cpus_allowed_list", func(pid int) (string, error) {
		return procLine(pid, "status", "Cpus_allowed_list:")
	})...)
	rows = append(rows, attr("setpriority-foreign", "setpriority", "nice value", func(pid int) (string, error) {
		n, err := nice(pid)
		return strconv.Itoa(n), err
	})...)
	rows = append(rows, attr("ioprio-foreign", "ioprio", "I/O priority", func(pid int) (string, error) {
		const whoProcess = 1
		r, _, e := unix.Syscall(unix.SYS_IOPRIO_GET, whoProcess, uintptr(pid), 0)
		if e != 0 {
			return "", e
		}
		return strconv.Itoa(int(r)), nil
	})...)
	return append(rows, []vcase{
		userRow("setpriority-user", false),
		userRow("setpriority-user-auto", true),
		signal("kill-foreign", "kill", false, false),
		signal("pidfd-send-signal-foreign", "pidfd-signal", false, false),
		signal("sigqueue-foreign", "sigqueue", false, false),
		signal("tgkill-foreign", "tgkill", false, false),
		signal("kill-group-foreign", "kill-group", true, false),
		// F_SETOWN may be accepted and the SIGIO dropped (Landlock's scope
		// does that): the victim tells.
		signal("fcntl-setown-foreign", "fcntl-setown", false, true),
	}...)
}
