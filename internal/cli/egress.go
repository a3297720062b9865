//go:build linux || darwin

package cli

import (
	"fmt"
	"io"

	"github.com/confine-sandbox/confine/internal/esc"
	"github.com/confine-sandbox/confine/spec"
)

// reportEgress tells a human which connections the egress proxy refused
// and how to allow them: one line per distinct refusal (a client that
// retries, as npm does, is refused the same way each time), with the
// count when it repeated.
func reportEgress(w io.Writer, cs []spec.Connection) {
	const show = 10
	var lines []string
	count := map[string]int{}
	for _, c := range cs {
		if c.Verdict != spec.VerdictDenied {
			continue
		}
		// What was refused, and the fix for the rule that refused it
		// (the proxy's hint). The command chose the host (and what the
		// reason and hint quote of its request): escaped, so that it
		// cannot forge a line.
		line := fmt.Sprintf("confine: network: refused %s %s:%d: %s", esc.Text(c.Protocol), esc.Text(c.Domain), c.Port, esc.Text(c.Reason))
		if c.Hint != "" {
			line += "; to allow it: " + esc.Text(c.Hint)
		}
		if count[line] == 0 {
			lines = append(lines, line)
		}
		count[line]++
	}
	for i, line := range lines {
		if i == show {
			fmt.Fprintf(w, "confine: ... and more refused connections (see --json or confine inspect)\n")
			break
		}
		if n := count[line]; n > 1 {
			line += fmt.Sprintf(" (%d times)", n)
		}
		fmt.Fprintln(w, line)
	}
}
