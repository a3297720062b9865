//go:build linux || darwin

package cli

import (
	"fmt"
	"io"

	"github.com/confine-sandbox/confine/spec"
)

// reportEgress tells a human which connections the egress proxy refused
// and how to allow them.
func reportEgress(w io.Writer, cs []spec.Connection) {
	const show = 10
	n := 0
	for _, c := range cs {
		if c.Verdict != spec.VerdictDenied {
			continue
		}
		if n == show {
			fmt.Fprintf(w, "confine: ... and more refused connections (see --json or confine inspect)\n")
			break
		}
		n++
		// One line: what was refused, and the fix for the rule that
		// refused it (the proxy's hint).
		line := fmt.Sprintf("confine: network: refused %s %s:%d: %s", c.Protocol, c.Domain, c.Port, c.Reason)
		if c.Hint != "" {
			line += "; to allow it: " + c.Hint
		}
		fmt.Fprintln(w, line)
	}
}
