//go:build linux

package launch

import (
	"net/netip"

	"github.com/confine-sandbox/confine/internal/notify"
	"github.com/confine-sandbox/confine/internal/plan"
)

// Egress connects a run's supervisor to the caller's egress proxy
// (network = "allowlist"): which process each proxy connection comes
// from, and which destinations were refused.
type Egress struct {
	// Register learns the local address of each connection the
	// supervisor makes to the proxy for a task (tid), before it connects.
	Register func(local netip.AddrPort, tid int)
	// Refused learns each destination a task tried to reach directly.
	Refused func(dst netip.AddrPort, tid int)
}

// egressConfig is the supervisor's part of p's egress; nil without one.
// A malformed address fails the supervisor's start (notify checks it).
func egressConfig(p *plan.Plan, e *Egress) *notify.Egress {
	if p.EgressProxy == "" {
		return nil
	}
	ap, _ := netip.ParseAddrPort(p.EgressProxy)
	ne := &notify.Egress{Proxy: ap}
	if e != nil {
		ne.Register, ne.Refused = e.Register, e.Refused
	}
	return ne
}
