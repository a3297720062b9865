//go:build linux && confine_simabi

package landlock

import "testing"

func TestSimulatedABI(t *testing.T) {
	for _, tc := range []struct {
		env          string
		kernel, want int
	}{
		{"", 7, 7},
		{"junk", 7, 7},
		{"0", 7, 7},
		{"1", 7, 1},
		{"3", 7, 3},
		{"9", 7, 7}, // never raised above the kernel's
	} {
		t.Setenv(SimEnv, tc.env)
		if got := simulatedABI(tc.kernel); got != tc.want {
			t.Errorf("%s=%q kernel %d: got %d, want %d", SimEnv, tc.env, tc.kernel, got, tc.want)
		}
	}
}
