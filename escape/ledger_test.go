//go:build linux

package escape

import (
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/ledger"
)

// Every guarantee of the ledger is attacked by rows of the escape table:
// a guarantee whose vectors match no row (renamed, removed, misspelled)
// fails here, so no guarantee goes unattacked.
func TestLedgerVectorsExist(t *testing.T) {
	var rows []string
	for _, vc := range append(vectors(), egressVectors()...) {
		rows = append(rows, vc.name)
	}
	match := func(pat string) bool {
		for _, r := range rows {
			if p, ok := strings.CutSuffix(pat, "*"); ok && strings.HasPrefix(r, p) || r == pat {
				return true
			}
		}
		return false
	}
	for _, g := range ledger.Entries() {
		if len(g.Vectors) == 0 {
			t.Errorf("%s: no vector attacks it", g.Name)
		}
		for _, v := range g.Vectors {
			if !match(v) {
				t.Errorf("%s: vector %q matches no row of the escape table", g.Name, v)
			}
		}
	}
}
