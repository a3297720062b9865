package cli

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// TestGuardNote: the note follows the ledger's own texts, so a reworded
// mechanism cannot silence it.
func TestGuardNote(t *testing.T) {
	mech := func(layers []ledger.Layer, gitDir bool) string {
		for _, d := range ledger.Decide(layers, ledger.Facts{LandlockABI: 7, Seccomp: true, GitDir: gitDir}) {
			if d.Name == policy.GGitPersistence {
				return d.Mechanism
			}
		}
		t.Fatal("no guard row in the ledger")
		return ""
	}
	core, withNS := []ledger.Layer{ledger.Core}, []ledger.Layer{ledger.Core, ledger.Namespaces}
	tests := []struct {
		name    string
		backend string
		g       spec.Guarantee
		want    bool
	}{
		{"core, guarded", provider.Core, spec.Guarantee{Name: policy.GGitPersistence, Mechanism: mech(core, true)}, true},
		{"core, no .git", provider.Core, spec.Guarantee{Name: policy.GGitPersistence, Mechanism: mech(core, false)}, false},
		{"core, waived", provider.Core, spec.Guarantee{Name: policy.GGitPersistence, Waived: true}, false},
		{"namespaces, guarded", provider.Namespaces, spec.Guarantee{Name: policy.GGitPersistence, Mechanism: mech(withNS, true)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := &spec.CommandResult{Backend: tt.backend, Guarantees: []spec.Guarantee{tt.g}}
			if got := guardNote(res) != ""; got != tt.want {
				t.Errorf("note %v, want %v (%q)", got, tt.want, guardNote(res))
			}
		})
	}
}
