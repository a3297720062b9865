package ledger

import (
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

// TestSeatbelt: on macOS the seatbelt layer stands alone. What it
// enforces, and what it cannot (refused by name unless waived), is this
// table; without sandbox-exec nothing is enforced.
func TestSeatbelt(t *testing.T) {
	enforced := []string{spec.GNoNetwork, spec.GCleanEnv, spec.GCredentials, spec.GNoInheritedFDs,
		spec.GFSWrite, spec.GFSRead, spec.GFSMetadata, spec.GGitPersistence, spec.GUnixSockets, spec.GTerminal}
	ds := Decide([]Layer{Seatbelt}, Facts{SandboxExec: true})
	for _, d := range ds {
		want := slices.Contains(enforced, d.Name)
		if got := d.Missing == ""; got != want {
			t.Errorf("%s: enforced %v, want %v (%+v)", d.Name, got, want, d)
		}
		if d.Missing == "" && (strings.Contains(d.Mechanism, "landlock") || strings.Contains(d.Mechanism, "seccomp")) {
			t.Errorf("%s: a Linux mechanism claimed on macOS: %s", d.Name, d.Mechanism)
		}
	}
	if _, err := Resolve(ds, nil); err == nil || !strings.Contains(err.Error(), spec.GSignals) {
		t.Errorf("Resolve without waivers = %v, want a refusal naming %s", err, spec.GSignals)
	}
	var waive []string
	for _, d := range ds {
		if d.Missing != "" {
			waive = append(waive, d.Name)
		}
	}
	if gs, err := Resolve(ds, waive); err != nil || len(gs) != len(ds) {
		t.Errorf("Resolve with every missing one waived = %v, %v", gs, err)
	}
	for _, d := range Decide([]Layer{Seatbelt}, Facts{}) {
		if d.Missing == "" {
			t.Errorf("%s enforced without sandbox-exec: %s", d.Name, d.Mechanism)
		}
	}
}
