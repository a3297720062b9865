//go:build linux

package seccomp

import (
	"fmt"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// TestSigchldToSupervisor: where forks or signals go to the supervisor,
// rt_sigaction(SIGCHLD, act != NULL) does too (so that the supervisor can
// add SA_RESTART, see sigchld.go); queries, other signals and every
// configuration without those flags are allowed in BPF.
func TestSigchldToSupervisor(t *testing.T) {
	const chld = uint64(unix.SIGCHLD)
	cases := []struct {
		name string
		args []uint64
		on   uint32 // under NotifyFork or NotifySignals
	}{
		{"install", []uint64{chld, 0x7ffc0000}, notif},
		{"install high pointer", []uint64{chld, 0x7fff_0000_0000}, notif},
		{"query", []uint64{chld, 0, 0x7ffc0000}, allow},
		{"other signal", []uint64{uint64(unix.SIGTERM), 0x7ffc0000}, allow},
		{"signum high word ignored", []uint64{chld | 1<<32, 0x7ffc0000}, notif},
		{"sigurg (Go preemption)", []uint64{uint64(unix.SIGURG), 0x7ffc0000}, allow},
	}
	for _, arch := range arches {
		for _, cfg := range []plan.Seccomp{
			{Arch: arch, NotifyFork: true},
			{Arch: arch, NotifySignals: true},
			{Arch: arch, NotifyMetadata: true, NotifyConnect: true, NotifyProcTargets: true},
		} {
			v := newVM(t, cfg)
			nr := v.table["rt_sigaction"]
			for _, c := range cases {
				want := c.on
				if !restartsSigchld(cfg) {
					want = allow
				}
				t.Run(fmt.Sprintf("%v/%v/%v/%s", arch, cfg.NotifyFork, cfg.NotifySignals, c.name), func(t *testing.T) {
					if got := v.run(t, nr, c.args...); got != want {
						t.Errorf("rt_sigaction(%#x) = %s, want %s", c.args, retName(got), retName(want))
					}
				})
			}
		}
	}
}
