package ledger

import (
	"os"
	"strings"
	"testing"
)

const (
	readme     = "../../README.md"
	beginTable = "<!-- ledger table: generated from internal/ledger; CONFINE_UPDATE_README=1 go test ./internal/ledger -->\n"
	endTable   = "<!-- end of ledger table -->\n"
)

// The README's guarantee table is the ledger's: generated from it, and
// this test fails when they differ (CONFINE_UPDATE_README=1 rewrites it).
func TestREADMETable(t *testing.T) {
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, beginTable), strings.Index(s, endTable)
	if i < 0 || j < i {
		t.Fatalf("README lacks the ledger table markers %q ... %q", beginTable, endTable)
	}
	want := s[:i+len(beginTable)] + Markdown() + s[j:]
	if want == s {
		return
	}
	if os.Getenv("CONFINE_UPDATE_README") == "1" {
		if err := os.WriteFile(readme, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatal("README's guarantee table differs from the ledger: run CONFINE_UPDATE_README=1 go test ./internal/ledger")
}
