//go:build linux

package planner

import (
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/spec"
)

// The launcher counts forks exactly where the ledger says its fork count is
// what bounds the run: uid 0 with a limit and seccomp, no pids cgroup, no
// pid_max, and the guarantee not waived.
func TestCountsForks(t *testing.T) {
	root := ledger.Facts{LandlockABI: 7, Seccomp: true, RootCommand: true}
	with := func(f ledger.Facts, change func(*ledger.Facts)) ledger.Facts { change(&f); return f }
	tests := []struct {
		name     string
		f        ledger.Facts
		maxProcs int64
		waived   bool
		want     bool
	}{
		{"uid 0, nothing else bounds it", root, 64, false, true},
		{"not uid 0 (RLIMIT_NPROC)", with(root, func(f *ledger.Facts) { f.RootCommand = false }), 64, false, false},
		{"pids cgroup", with(root, func(f *ledger.Facts) { f.PidsCgroup = true }), 64, false, false},
		{"pid_max", with(root, func(f *ledger.Facts) { f.PidMax = true }), 64, false, false},
		{"no seccomp", with(root, func(f *ledger.Facts) { f.Seccomp = false }), 64, false, false},
		{"no limit", root, 0, false, false},
		{"waived", root, 64, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Inputs{Limits: spec.Limits{MaxProcs: tt.maxProcs}, pidsOptional: tt.waived}
			if got := in.countsForks(tt.f); got != tt.want {
				t.Errorf("countsForks = %v, want %v", got, tt.want)
			}
			// Whenever it counts, the ledger names the fork count as the
			// mechanism of the core.
			if tt.want {
				for _, d := range ledger.Decide([]ledger.Layer{ledger.Core}, tt.f) {
					if d.Name == "bounded-processes" && !strings.Contains(d.Mechanism, "counts the run's tasks") {
						t.Errorf("the launcher counts forks but the ledger has no mechanism: %+v", d)
					}
				}
			}
		})
	}
}
