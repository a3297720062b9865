package ledger

import (
	"os"
	"strings"
	"testing"
)

const (
	guaranteesDoc = "../../docs/guarantees.md"
	beginTable    = "<!-- ledger table: generated from internal/ledger; CONFINE_UPDATE_DOCS=1 go test ./internal/ledger -->\n"
	endTable      = "<!-- end of ledger table -->\n"
)

// The guarantee table in docs/guarantees.md is the ledger's: generated
// from it, and this test fails when they differ (CONFINE_UPDATE_DOCS=1
// rewrites it).
func TestGuaranteesTable(t *testing.T) {
	b, err := os.ReadFile(guaranteesDoc)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, beginTable), strings.Index(s, endTable)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the ledger table markers %q ... %q", guaranteesDoc, beginTable, endTable)
	}
	want := s[:i+len(beginTable)] + Markdown() + s[j:]
	if want == s {
		return
	}
	if os.Getenv("CONFINE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(guaranteesDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("the guarantee table in %s differs from the ledger: run CONFINE_UPDATE_DOCS=1 go test ./internal/ledger", guaranteesDoc)
}
