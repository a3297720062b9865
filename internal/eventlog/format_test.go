//go:build unix

package eventlog

import (
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestFormat(t *testing.T) {
	var b strings.Builder
	Format(&b, fullEvent())
	out := b.String()
	for _, want := range []string{
		"run               0123456789abcdef\n",
		"time              2026-03-04T05:06:07.891+01:00\n",
		"backend           landlock\n",
		"landlock abi      6\n",
		"layers            landlock, seccomp, seccomp-notify, rlimits, pids-cgroup\n",
		"argv              sh -c \"echo \\\"<a&b>\\\"\\n\\x1b[31m\\u2028\" \"bad\\xffutf8\"\n",
		"env names         HOME PATH\n",
		"signal            9 (SIGKILL)\n",
		"duration          1.5s\n",
		"stdout bytes      2097152\n",
		"stdout truncated  yes\n",
		"stderr truncated  no\n",
		"error             sandbox unavailable",
		"skipped backends\n  bwrap  not installed\n",
		"limits\n  wall time   10m0s\n  cpu time    10m0s\n  memory      8GiB\n",
		"  output      1MiB\n",
		"guarantees\n  no-network          seccomp\n  no-foreign-signals  WAIVED\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\u2028") {
		t.Errorf("output carries raw control characters:\n%q", out)
	}
}

func TestFormatValues(t *testing.T) {
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{"plain argv", Event{Argv: []string{"go", "test", "./..."}}, "argv              go test ./...\n"},
		{"quoted argv", Event{Argv: []string{"sh", "-c", "echo it's"}}, `argv              sh -c 'echo it'\''s'` + "\n"},
		{"empty arg", Event{Argv: []string{"x", ""}}, "argv              x ''\n"},
		{"no argv", Event{}, "argv              -\n"},
		{"no landlock", Event{}, "landlock abi      none\n"},
		{"no error line", Event{}, "denials           0\n"},
		{"mechanism missing", Event{Guarantees: []spec.Guarantee{{Name: "g"}}}, "  g  -\n"},
		{"odd size", Event{Limits: spec.Limits{MemoryBytes: 1000}}, "  memory      1000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b strings.Builder
			Format(&b, tt.e)
			if !strings.Contains(b.String(), tt.want) {
				t.Fatalf("output lacks %q:\n%s", tt.want, b.String())
			}
			if strings.Contains(b.String(), "error ") {
				t.Fatalf("error line printed for an event without error:\n%s", b.String())
			}
		})
	}
}
