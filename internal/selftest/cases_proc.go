//go:build linux

package selftest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/spec"
)

// processTargetCases attack what the core closes on every kernel (issue
// 10, point 2): calls that change another process by pid (a victim
// process the selftest started, outside the run, as the same user), and
// set-ID bits on files the run creates or changes in its work directory.
func processTargetCases() []Case {
	// attr: the victim's attribute read before the attack must not change.
	attr := func(name, vector, what string, read func(pid int) (string, error)) Case {
		return Case{Guarantee: spec.GSignals, Name: name, Vector: vector, Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=victim")
			if err != nil {
				return Fixture{}, err
			}
			before, err := read(v.Pid)
			if err != nil {
				return Fixture{}, fmt.Errorf("%s of the victim: %w", what, err)
			}
			return Fixture{Args: []string{strconv.Itoa(v.Pid)}, Intact: v.Check, MustReport: true,
				Effect: func() (bool, string) {
					now, err := read(v.Pid)
					if err != nil {
						return false, fmt.Sprintf("%s: %v", what, err)
					}
					if now != before {
						return true, fmt.Sprintf("%s of pid %d changed from %q to %q", what, v.Pid, before, now)
					}
					return false, fmt.Sprintf("%s of pid %d still %q", what, v.Pid, before)
				}}, nil
		}}
	}
	// signal: the victim must live.
	signal := func(name, vector string) Case {
		return Case{Guarantee: spec.GSignals, Name: name, Vector: vector, Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=victim")
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{strconv.Itoa(v.Pid)}, Effect: v.Ended(e.settle()), Intact: v.Check}, nil
		}}
	}
	// setID: a file in the work directory must not end up set-user-ID
	// or set-group-ID; with existing, the run changes a file there, else
	// it creates one.
	setID := func(name, vector, mode string, bits uint32, existing bool) Case {
		g := spec.GNoPrivilege
		return Case{Guarantee: g, Name: name, Vector: vector, Setup: func(e *Env) (Fixture, error) {
			p := filepath.Join(e.Workdir, fixture.RandName("tool-"))
			if existing {
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
					return Fixture{}, err
				}
			}
			e.onCleanup(func() { _ = os.Remove(p) })
			return Fixture{Args: []string{p, mode}, Effect: func() (bool, string) {
				var st unix.Stat_t
				if err := unix.Lstat(p, &st); err != nil {
					return false, p + " does not exist"
				}
				return st.Mode&bits != 0, fmt.Sprintf("%s has mode %#o", p, st.Mode&0o7777)
			}}, nil
		}}
	}
	return []Case{
		attr("prlimit-foreign", "prlimit", "soft RLIMIT_NOFILE", softNofile),
		attr("setpriority-foreign", "setpriority", "nice value", niceValue),
		signal("sigqueue-foreign", "sigqueue"),
		signal("pidfd-send-signal-foreign", "pidfd-signal"),
		setID("chmod-setuid-workdir", "chmod", "4755", unix.S_ISUID, true),
		setID("open-creat-setuid", "open-creat-mode", "4755", unix.S_ISUID, false),
		setID("open-creat-setgid", "open-creat-mode", "2755", unix.S_ISGID, false),
	}
}

// softNofile reads the soft RLIMIT_NOFILE of pid from /proc/PID/limits.
func softNofile(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return f[0], nil
			}
		}
	}
	return "", fmt.Errorf("no open-files row in /proc/%d/limits", pid)
}

// niceValue reads the nice value of pid from /proc/PID/stat.
func niceValue(pid int) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 17 {
		return "", fmt.Errorf("short /proc/%d/stat", pid)
	}
	return f[16], nil
}
