//go:build linux && !confine_simabi

package landlock

import (
	"testing"
)

// A release build ignores the simulation variable entirely.
func TestReleaseIgnoresSimulation(t *testing.T) {
	t.Setenv("CONFINE_SIM_LANDLOCK_ABI", "1")
	if Simulated {
		t.Fatal("release build reports Simulated")
	}
	for _, k := range []int{1, 2, 6, 7} {
		if got := simulatedABI(k); got != k {
			t.Errorf("kernel ABI %d reported as %d", k, got)
		}
	}
}
