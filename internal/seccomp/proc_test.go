//go:build linux

package seccomp

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// procModel is the expected outcome of a procCalls row with all-zero
// arguments (pid 0, which 0, cmd 0), for TestSweep.
func procModel(cfg plan.Seccomp, name string) (uint32, bool) {
	for _, c := range procCalls {
		if c.name != name {
			continue
		}
		switch {
		case c.action == procDeny && cfg.NotifyProcTargets:
			return eperm, true
		case c.action == procSignal && cfg.NotifySignals && name != "kill" && name != "fcntl":
			return notif, true
		}
		return allow, true
	}
	return 0, false
}

// TestProcFilterTable walks the process rules with real arguments, for
// every combination of the two flags: what a flag does not turn on is
// allowed as before.
func TestProcFilterTable(t *testing.T) {
	const (
		self    = 0
		other   = 4242
		neg     = 0xffffffff // -1 in the low word
		highOth = hi         // pid 0 in the low word, garbage above: the kernel sees 0
	)
	type pcase struct {
		sys  string
		args []uint64
		proc uint32 // under NotifyProcTargets
		sig  uint32 // under NotifySignals
	}
	cases := []pcase{
		{"prlimit64", []uint64{self, unix.RLIMIT_NOFILE, 0x7ffc0000, 0}, allow, allow},
		{"prlimit64", []uint64{highOth, unix.RLIMIT_NOFILE, 0x7ffc0000, 0}, allow, allow},
		{"prlimit64", []uint64{other, unix.RLIMIT_NOFILE, 0x7ffc0000, 0}, notif, allow},
		{"prlimit64", []uint64{other | hi, unix.RLIMIT_CPU}, notif, allow},
		{"sched_setaffinity", []uint64{self, 8, 0x7ffc0000}, allow, allow},
		{"sched_setaffinity", []uint64{other, 8, 0x7ffc0000}, notif, allow},
		{"sched_setscheduler", []uint64{other}, notif, allow},
		{"sched_setparam", []uint64{other}, notif, allow},
		{"sched_setattr", []uint64{other}, notif, allow},
		{"sched_setattr", []uint64{self}, allow, allow},
		{"migrate_pages", []uint64{other}, notif, allow},
		{"move_pages", []uint64{other}, notif, allow},
		{"move_pages", []uint64{neg}, notif, allow},
		{"process_mrelease", []uint64{3, 0}, eperm, allow},
		// setpriority(which, who, prio)
		{"setpriority", []uint64{prioProcess, self, 10}, allow, allow},
		{"setpriority", []uint64{prioProcess, other, 10}, notif, allow},
		{"setpriority", []uint64{prioProcess | hi, other, 10}, notif, allow},
		{"setpriority", []uint64{prioPgrp, self, 10}, allow, allow},
		{"setpriority", []uint64{prioPgrp, other, 10}, eperm, allow},
		{"setpriority", []uint64{prioUser, self, 10}, eperm, allow},
		{"setpriority", []uint64{prioUser, 65534, 10}, eperm, allow},
		{"setpriority", []uint64{prioUser | hi, 0, 10}, eperm, allow},
		{"setpriority", []uint64{7, other, 10}, allow, allow}, // EINVAL in the kernel
		// ioprio_set(which, who, ioprio)
		{"ioprio_set", []uint64{ioprioWhoProcess, self, 0x6000}, allow, allow},
		{"ioprio_set", []uint64{ioprioWhoProcess, other, 0x6000}, notif, allow},
		{"ioprio_set", []uint64{ioprioWhoPgrp, self, 0x6000}, allow, allow},
		{"ioprio_set", []uint64{ioprioWhoPgrp, other, 0x6000}, eperm, allow},
		{"ioprio_set", []uint64{ioprioWhoUser, self, 0x6000}, eperm, allow},
		{"ioprio_set", []uint64{0, other, 0x6000}, allow, allow},
		// Signals.
		{"kill", []uint64{self, 9}, allow, allow},
		{"kill", []uint64{highOth, 9}, allow, allow},
		{"kill", []uint64{other, 9}, allow, notif},
		{"kill", []uint64{neg, 9}, allow, notif},
		{"kill", []uint64{-other & 0xffffffff, 15}, allow, notif},
		{"tkill", []uint64{other, 9}, allow, notif},
		{"tgkill", []uint64{other, other, 9}, allow, notif},
		{"rt_sigqueueinfo", []uint64{other, 10, 0x7ffc0000}, allow, notif},
		{"rt_tgsigqueueinfo", []uint64{other, other, 10, 0x7ffc0000}, allow, notif},
		{"pidfd_send_signal", []uint64{3, 9, 0, 0}, allow, notif},
		{"fcntl", []uint64{3, unix.F_SETOWN, other}, allow, notif},
		{"fcntl", []uint64{3, unix.F_SETOWN, -other & 0xffffffff}, allow, notif},
		{"fcntl", []uint64{3, unix.F_SETOWN, 0}, allow, allow},
		{"fcntl", []uint64{3, unix.F_SETOWN | hi, hi}, allow, allow},
		{"fcntl", []uint64{3, unix.F_SETOWN_EX, 0x7ffc0000}, allow, eperm},
		{"fcntl", []uint64{3, unix.F_GETFL}, allow, allow},
		{"fcntl", []uint64{3, unix.F_DUPFD_CLOEXEC, 3}, allow, allow},
		{"fcntl", []uint64{3, unix.F_GETOWN}, allow, allow},
		{"ioctl", []uint64{3, fioSetown, 0x7ffc0000}, allow, eperm},
		{"ioctl", []uint64{3, siocSpgrp, 0x7ffc0000}, allow, eperm},
		{"ioctl", []uint64{3, tiocsti}, eperm, eperm},
		{"ioctl", []uint64{3, fionread}, allow, allow},
	}
	for _, arch := range arches {
		for _, flags := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			cfg := plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyProcTargets: flags[0], NotifySignals: flags[1]}
			v := newVM(t, cfg)
			for _, c := range cases {
				want := uint32(allow)
				if flags[0] && c.proc != allow {
					want = c.proc
				}
				if flags[1] && c.sig != allow {
					want = c.sig
				}
				if c.sys == "ioctl" && c.args[1] == tiocsti {
					want = eperm
				}
				t.Run(fmt.Sprintf("%v/proc=%v/sig=%v/%s%#x", arch, flags[0], flags[1], c.sys, c.args), func(t *testing.T) {
					if got := v.run(t, v.nr(t, c.sys), c.args...); got != want {
						t.Errorf("%s(%#x) = %s, want %s", c.sys, c.args, retName(got), retName(want))
					}
				})
			}
		}
	}
}

// TestProcCallsTable checks the table itself: every row has a reason,
// no name repeats, a rule's name exists on both arches, and a row that
// says another list refuses the call is true.
func TestProcCallsTable(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range procCalls {
		if seen[c.name] {
			t.Errorf("%s listed twice", c.name)
		}
		seen[c.name] = true
		if strings.TrimSpace(c.why) == "" {
			t.Errorf("%s has no reason", c.name)
		}
		if c.action != procNone {
			for _, arch := range arches {
				if _, table, _ := archInfo(arch); table[c.name] == 0 {
					t.Errorf("%v has no number for %s", arch, c.name)
				}
			}
		}
		if strings.Contains(c.why, "epermCalls") != slices.Contains(epermCalls, c.name) {
			t.Errorf("%s: reason %q disagrees with epermCalls", c.name, c.why)
		}
	}
	// The brief's list: each must have a rule, not only a reason.
	for _, n := range []string{"prlimit64", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
		"sched_setattr", "setpriority", "ioprio_set", "migrate_pages", "move_pages", "process_mrelease",
		"kill", "tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo", "pidfd_send_signal"} {
		i := slices.IndexFunc(procCalls, func(c procCall) bool { return c.name == n })
		if i < 0 || procCalls[i].action == procNone {
			t.Errorf("%s has no rule", n)
		}
	}
}

// TestProcDenied: Denied lists the process rules exactly when the flags
// are on.
func TestProcDenied(t *testing.T) {
	for _, arch := range arches {
		for _, cfg := range []plan.Seccomp{{Arch: arch}, {Arch: arch, NotifyProcTargets: true}, {Arch: arch, NotifySignals: true}} {
			rules, err := Denied(cfg)
			if err != nil {
				t.Fatal(err)
			}
			has := func(name string) bool {
				return slices.ContainsFunc(rules, func(r Rule) bool { return r.Syscall == name })
			}
			if has("prlimit64") != cfg.NotifyProcTargets || has("setpriority") != cfg.NotifyProcTargets {
				t.Errorf("%+v: prlimit64/setpriority listed %v/%v", cfg, has("prlimit64"), has("setpriority"))
			}
			if has("kill") != cfg.NotifySignals || has("tgkill") != cfg.NotifySignals || has("fcntl") != cfg.NotifySignals {
				t.Errorf("%+v: kill/tgkill/fcntl listed %v/%v/%v", cfg, has("kill"), has("tgkill"), has("fcntl"))
			}
		}
	}
}

// TestProcRulesKeepCache: turning the process rules on adds filter runs
// only for their own numbers (fcntl among them); hot calls stay free.
func TestProcRulesKeepCache(t *testing.T) {
	for _, arch := range arches {
		cfg := plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true, NotifyProcTargets: true, NotifySignals: true}
		raw, err := Build(cfg)
		if err != nil {
			t.Fatal(err)
		}
		audit, _, _ := archInfo(arch)
		common := commonAMD64
		if arch == ARM64 {
			common = commonARM64
		}
		for _, name := range argFree {
			if !constAllow(raw, audit, common[name]) {
				t.Errorf("%v: %s is no longer provably ALLOW", arch, name)
			}
		}
	}
}
