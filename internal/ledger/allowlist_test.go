package ledger

import (
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

// TestAllowlistNetwork: the no-network row names the egress proxy for an
// allowlist run and the AF_UNIX-only filter for a deny-all one, and
// refuses an allowlist under bubblewrap (its supervisor has no proxy).
func TestAllowlistNetwork(t *testing.T) {
	f := Facts{LandlockABI: 6, Seccomp: true}
	tests := []struct {
		name      string
		layers    []Layer
		allowlist bool
		mech      string // "" = refused
		notMech   string
		missing   string
	}{
		{"core deny-all", []Layer{Core}, false, "socket() limited to AF_UNIX", "egress proxy", ""},
		{"core allowlist", []Layer{Core}, true, "egress proxy", "limited to AF_UNIX", ""},
		{"namespaces allowlist", []Layer{Core, Namespaces}, true, "egress proxy", "limited to AF_UNIX", ""},
		{"bubblewrap deny-all", []Layer{Core, Bwrap}, false, "limited to AF_UNIX", "egress proxy", ""},
		{"bubblewrap allowlist", []Layer{Core, Bwrap}, true, "", "", "a backend other than bubblewrap"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.Allowlist = tt.allowlist
			var d Decision
			for _, x := range Decide(tt.layers, f) {
				if x.Name == spec.GNoNetwork {
					d = x
				}
			}
			if tt.mech == "" {
				if d.Mechanism != "" || !strings.Contains(d.Missing, tt.missing) {
					t.Fatalf("decision %+v; want refused, missing %q", d, tt.missing)
				}
				return
			}
			if !strings.Contains(d.Mechanism, tt.mech) || strings.Contains(d.Mechanism, tt.notMech) || d.Missing != "" {
				t.Fatalf("decision %+v; want mechanism with %q, without %q", d, tt.mech, tt.notMech)
			}
		})
	}
	// Without seccomp notification nothing enforces an allowlist.
	f = Facts{LandlockABI: 6, Allowlist: true}
	for _, d := range Decide([]Layer{Core}, f) {
		if d.Name == spec.GNoNetwork && (d.Mechanism != "" || !strings.Contains(d.Missing, "seccomp")) {
			t.Fatalf("allowlist without seccomp: %+v", d)
		}
	}
}
