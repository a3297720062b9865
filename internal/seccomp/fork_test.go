//go:build linux

package seccomp

import (
	"fmt"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// TestNotifyFork: under plan.Seccomp.NotifyFork every task-creating call that the
// filter lets through reaches the supervisor (clone without namespace
// flags, fork, vfork), namespace clones are still refused in BPF, clone3
// stays ENOSYS, and without the flag nothing changes.
func TestNotifyFork(t *testing.T) {
	const sigchld = uint64(unix.SIGCHLD)
	thread := uint64(unix.CLONE_VM | unix.CLONE_FS | unix.CLONE_FILES | unix.CLONE_SIGHAND |
		unix.CLONE_THREAD | unix.CLONE_SYSVSEM | unix.CLONE_SETTLS | unix.CLONE_PARENT_SETTID | unix.CLONE_CHILD_CLEARTID)
	cases := []struct {
		name, sys string
		args      []uint64
		on, off   uint32 // with and without NotifyFork
	}{
		{"fork", "clone", []uint64{sigchld}, notif, allow},
		{"vfork", "clone", []uint64{unix.CLONE_VM | unix.CLONE_VFORK | sigchld}, notif, allow},
		{"thread", "clone", []uint64{thread}, notif, allow},
		{"parent", "clone", []uint64{unix.CLONE_PARENT | sigchld}, notif, allow},
		{"high word ignored", "clone", []uint64{unix.CLONE_NEWUSER << 32}, notif, allow},
		{"newuser", "clone", []uint64{unix.CLONE_NEWUSER | sigchld}, eperm, eperm},
		{"newpid thread", "clone", []uint64{unix.CLONE_NEWPID | thread}, eperm, eperm},
		{"", "clone3", []uint64{0, 88}, enosys, enosys},
		{"", "fork", nil, notif, allow},
		{"", "vfork", nil, notif, allow},
	}
	for _, arch := range arches {
		on := newVM(t, plan.Seccomp{Arch: arch, NotifyFork: true, NotifyMetadata: true, NotifyConnect: true})
		off := newVM(t, plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true})
		for _, c := range cases {
			nr, ok := on.table[c.sys]
			if !ok {
				continue // arm64 has neither fork nor vfork
			}
			t.Run(fmt.Sprintf("%v/%s/%s", arch, c.sys, c.name), func(t *testing.T) {
				if got := on.run(t, nr, c.args...); got != c.on {
					t.Errorf("NotifyFork: %s(%#x) = %s, want %s", c.sys, c.args, retName(got), retName(c.on))
				}
				if got := off.run(t, nr, c.args...); got != c.off {
					t.Errorf("without: %s(%#x) = %s, want %s", c.sys, c.args, retName(got), retName(c.off))
				}
			})
		}
		rules, err := Denied(plan.Seccomp{Arch: arch, NotifyFork: true})
		if err != nil {
			t.Fatal(err)
		}
		notified := map[string]bool{}
		for _, r := range rules {
			if r.Notify {
				notified[r.Syscall] = true
			}
		}
		if !notified["clone"] || (arch == AMD64 && (!notified["fork"] || !notified["vfork"])) {
			t.Errorf("%v: Denied lists notified %v, want clone (and fork, vfork on amd64)", arch, notified)
		}
	}
}
