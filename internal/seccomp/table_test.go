//go:build linux

package seccomp

import "testing"

// checkTable compares a hand-written syscall table with x/sys/unix's
// numbers, in both directions.
func checkTable(t *testing.T, what string, got, want map[string]uint32) {
	t.Helper()
	for name, nr := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s lacks %s (%d)", what, name, nr)
		} else if g != nr {
			t.Errorf("%s[%s] = %d, x/sys/unix says %d", what, name, g, nr)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s has %s, which the test does not check", what, name)
		}
	}
}
