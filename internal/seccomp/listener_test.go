//go:build linux

package seccomp

import (
	"slices"
	"testing"
)

// TestListener sets each switch of plan.Seccomp alone and checks that
// plan.Seccomp.Listener says the filter needs a listener exactly when the
// filter built from it hands some call to the supervisor: a switch added
// to the plan's section but not to Listener fails here.
func TestListener(t *testing.T) {
	for _, sw := range append(switches(), "") {
		for _, arch := range arches {
			cfg := switchedOn(arch, sw)
			rules, err := Denied(cfg)
			if err != nil {
				t.Fatal(err)
			}
			notifies := slices.ContainsFunc(rules, func(r Rule) bool { return r.Notify })
			if got := cfg.Listener(); got != notifies {
				t.Errorf("%s on %s alone: Listener() = %v, the filter notifies: %v", sw, arch, got, notifies)
			}
		}
	}
}
