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
		fmt.Fprintf(w, "confine: network: refused %s %s:%d: %s\n", c.Protocol, c.Domain, c.Port, c.Reason)
		if c.ApprovalRequest != "" {
			fmt.Fprintf(w, "confine: network: to allow it: confine approve %s (then run with --approval TOKEN), or add %q to the profile's [allowlist] hosts\n", c.ApprovalRequest, fmt.Sprintf("%s:%d", c.Domain, c.Port))
		}
	}
}
