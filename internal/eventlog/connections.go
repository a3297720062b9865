//go:build unix

package eventlog

import (
	"fmt"
	"io"
	"net"
	"strconv"

	"github.com/confine-sandbox/confine/internal/esc"
)

// formatConnections writes the task and job ids and the egress proxy's
// records (network = "allowlist"), one line each:
// "denied  http-connect denied.test:443 pid 42 in 0 out 0  reason [request req-...]".
func formatConnections(w io.Writer, e Event) {
	if e.TaskID == "" && e.JobID == "" && len(e.Connections) == 0 {
		return
	}
	fmt.Fprintf(w, "%-*s%s\n", labelWidth, "task", orDash(esc.Text(e.TaskID)))
	fmt.Fprintf(w, "%-*s%s\n", labelWidth, "job", orDash(esc.Text(e.JobID)))
	if len(e.Connections) == 0 {
		return
	}
	fmt.Fprintln(w, "connections")
	rows := make([][2]string, len(e.Connections))
	for i, c := range e.Connections {
		how := fmt.Sprintf("%s %s pid %d in %d out %d  %s", esc.Text(c.Protocol), esc.Text(net.JoinHostPort(c.Domain, strconv.Itoa(c.Port))),
			c.PID, c.BytesIn, c.BytesOut, esc.Text(c.Reason))
		if c.ApprovalID != "" {
			how += " [approval " + esc.Text(c.ApprovalID) + "]"
		}
		if c.ApprovalRequest != "" {
			how += " [request " + esc.Text(c.ApprovalRequest) + "]"
		}
		rows[i] = [2]string{esc.Text(c.Verdict), how}
	}
	table(w, rows)
}
