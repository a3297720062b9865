package ledger

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/docsection"
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
	docsection.Check(t, guaranteesDoc, beginTable, endTable, Markdown(), "the guarantee table",
		"CONFINE_UPDATE_DOCS=1 go test ./internal/ledger")
}
