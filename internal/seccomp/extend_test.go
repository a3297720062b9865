//go:build linux

package seccomp

import (
	"slices"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
)

// A notified call is data, in three places: the seccomp tables (its
// numbers a row of sysnums, the plan.Seccomp switch that turns it on a row
// of notifiedCalls), its handler in internal/notify (a kind and a row of
// sysCalls), and the ledger row of the guarantee it serves. The switch is
// the plan's own field, plan.Seccomp being the filter's only
// configuration: nothing converts it between the planner and the filter,
// and plan.Seccomp.Listener already opens the listener (TestListener).
// This test registers a test-only call (sync, never named by any rule)
// with one row in each seccomp table, in this file alone, builds the
// filter from a plan's own section as the launcher does, and checks that
// the filter hands it to the supervisor, that the launcher would open the
// listener for it, that the description lists it, and that nothing else
// changed.
func TestAddNotifiedCall(t *testing.T) {
	const name = "sync"
	withSync := tables{
		nums:     append(slices.Clone(sysnums), sysnum{name, 162, 81}),
		notified: append(slices.Clone(notifiedCalls), notifiedCall{[]string{name}, func(c plan.Seccomp) bool { return c.NotifyMetadata }}),
	}
	if _, ok := amd64Nr[name]; ok {
		t.Fatalf("%s already has a rule: pick another test-only call", name)
	}
	for _, arch := range arches {
		for _, on := range []bool{false, true} {
			p := &plan.Plan{Seccomp: plan.Seccomp{Arch: arch, NotifyMetadata: on, NotifyConnect: true}}
			cfg := p.Seccomp
			v := newVMOf(t, withSync, cfg)
			want := uint32(allow)
			if on {
				want = notif
			}
			if got := v.run(t, v.nr(t, name), 1, 2, 3); got != want {
				t.Errorf("%+v: %s = %s, want %s", cfg, name, retName(got), retName(want))
			}
			// Every other call is decided as before.
			base := newVM(t, cfg)
			for other, nr := range base.table {
				if got, was := v.run(t, nr, 1, 2, 3), base.run(t, nr, 1, 2, 3); got != was {
					t.Errorf("%+v: %s = %s with %s added, %s without", cfg, other, retName(got), name, retName(was))
				}
			}
			rules, err := withSync.denied(cfg)
			if err != nil {
				t.Fatal(err)
			}
			before, err := builtin.denied(cfg)
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(rules, func(r Rule) bool { return r.Syscall == name })
			if listed := i >= 0; listed != on {
				t.Fatalf("%+v: %s listed %v", cfg, name, listed)
			}
			if on {
				if !cfg.Listener() {
					t.Errorf("%+v: %s is notified, but the plan asks for no listener", cfg, name)
				}
				if r := rules[i]; !r.Notify || r.When != "" || r.Nr != v.nr(t, name) {
					t.Errorf("%+v: %s described as %+v", cfg, name, r)
				}
				rules = slices.Delete(rules, i, i+1)
			}
			if !slices.Equal(rules, before) {
				t.Errorf("%+v: adding %s changed other rules", cfg, name)
			}
		}
	}
}
