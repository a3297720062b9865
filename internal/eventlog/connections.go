//go:build unix

package eventlog

import (
	"fmt"
	"io"
	"net"
	"strconv"
)

// formatConnections writes the task and job ids and the egress proxy's
// records (network = "allowlist"), one line each:
// "denied  http-connect denied.test:443 pid 42 in 0 out 0  reason [request req-...]".
func formatConnections(w io.Writer, e Event) {
	if e.TaskID == "" && e.JobID == "" && len(e.Connections) == 0 {
		return
	}
	fmt.Fprintf(w, "%-*s%s\n", labelWidth, "task", orDash(clean(e.TaskID)))
	fmt.Fprintf(w, "%-*s%s\n", labelWidth, "job", orDash(clean(e.JobID)))
	if len(e.Connections) == 0 {
		return
	}
	fmt.Fprintln(w, "connections")
	rows := make([][2]string, len(e.Connections))
	for i, c := range e.Connections {
		how := fmt.Sprintf("%s %s pid %d in %d out %d  %s", clean(c.Protocol), clean(net.JoinHostPort(c.Domain, strconv.Itoa(c.Port))),
			c.PID, c.BytesIn, c.BytesOut, clean(c.Reason))
		if c.ApprovalID != "" {
			how += " [approval " + clean(c.ApprovalID) + "]"
		}
		if c.ApprovalRequest != "" {
			how += " [request " + clean(c.ApprovalRequest) + "]"
		}
		rows[i] = [2]string{clean(c.Verdict), how}
	}
	table(w, rows)
}
