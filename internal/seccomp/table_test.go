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

// Only calls from the unified range (424 on) may be written once for every
// architecture; each architecture's table then carries them.
func TestUnifiedNumbers(t *testing.T) {
	for name, nr := range unifiedNr {
		if nr < 424 {
			t.Errorf("unifiedNr[%s] = %d: below 424 the architectures number calls differently", name, nr)
		}
		for arch, table := range map[string]map[string]uint32{"amd64": amd64Nr, "arm64": arm64Nr} {
			if table[name] != nr {
				t.Errorf("%sNr[%s] = %d, unifiedNr says %d", arch, name, table[name], nr)
			}
		}
	}
}
