//go:build !linux && !darwin

package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestNoBackendRefuses: run (with any flags), check and unknown commands
// refuse with the WSL2 / Linux container message; only version succeeds.
func TestNoBackendRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"run", "--", "cmd.exe", "/c", "echo", "hi"}, ExitConfine},
		{[]string{"run", "--json", "--timeout", "1s", "--", "whoami"}, ExitConfine},
		{[]string{"selftest"}, ExitConfine},
		{nil, ExitConfine},
		{[]string{"check"}, 1},
		{[]string{"version"}, 0},
	} {
		var out, errb bytes.Buffer
		if got := Main(tc.args, &out, &errb); got != tc.code {
			t.Errorf("Main(%q) = %d, want %d (stderr %q)", tc.args, got, tc.code, errb.String())
		}
		if tc.code != 0 && !strings.Contains(errb.String(), "WSL2 or in a Linux container") {
			t.Errorf("Main(%q) stderr %q lacks the WSL2 message", tc.args, errb.String())
		}
		if strings.Contains(out.String(), "hi") {
			t.Errorf("Main(%q) ran something: %q", tc.args, out.String())
		}
	}
}
