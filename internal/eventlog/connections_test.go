//go:build unix

package eventlog

import (
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestFormatConnections(t *testing.T) {
	e := fullEvent()
	e.TaskID, e.JobID = "task-1", "job\x1b2"
	e.Connections = []spec.Connection{
		{Domain: "allowed.test", Port: 443, Protocol: "http-connect", PID: 7, BytesIn: 10, BytesOut: 5, Verdict: "allowed", Reason: `allowlist entry "allowed.test"`},
		{Domain: "denied.test", Port: 80, Protocol: "http", PID: 8, Verdict: "denied", Reason: "not in the allowlist", ApprovalRequest: "req-1"},
	}
	var b strings.Builder
	Format(&b, e)
	out := b.String()
	for _, want := range []string{
		"task              task-1\n",
		"job               \"job\\x1b2\"\n",
		"connections\n",
		"  allowed  http-connect allowed.test:443 pid 7 in 10 out 5  allowlist entry \"allowed.test\"\n",
		"  denied   http denied.test:80 pid 8 in 0 out 0  not in the allowlist [request req-1]\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	// A run without any prints neither.
	b.Reset()
	Format(&b, fullEvent())
	if strings.Contains(b.String(), "connections") || strings.Contains(b.String(), "task ") {
		t.Errorf("a run without ids or connections shows them:\n%s", b.String())
	}
}
