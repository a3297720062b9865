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

// From 424 on (Linux 5.1) the architectures number a call alike: a row
// in that range has one number in every column. Each call has one row.
func TestUnifiedNumbers(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range sysnums {
		if seen[r.name] {
			t.Errorf("%s has two rows", r.name)
		}
		seen[r.name] = true
		if (r.amd64 >= 424 || r.arm64 >= 424) && r.amd64 != r.arm64 {
			t.Errorf("%s: amd64 %d, arm64 %d: from 424 on the architectures agree", r.name, r.amd64, r.arm64)
		}
	}
}
