//go:build linux

package notify

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/seccomp"
)

// TestSysKindsOneBlock: every sysKind constant of the package is in one
// const block of kinds.go, where only the first has a value (iota), so
// that no two kinds can be equal.
func TestSysKindsOneBlock(t *testing.T) {
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	blocks := 0
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST || len(g.Specs) == 0 {
				continue
			}
			first := g.Specs[0].(*ast.ValueSpec)
			if id, ok := first.Type.(*ast.Ident); !ok || id.Name != "sysKind" {
				// A later spec of another block typed sysKind.
				for _, s := range g.Specs {
					if id, ok := s.(*ast.ValueSpec).Type.(*ast.Ident); ok && id.Name == "sysKind" {
						t.Errorf("%s: sysKind %s declared outside kinds.go's block", fset.Position(s.Pos()), s.(*ast.ValueSpec).Names[0])
					}
				}
				continue
			}
			if e.Name() != "kinds.go" {
				t.Errorf("%s: sysKind constants declared outside kinds.go", fset.Position(g.Pos()))
				continue
			}
			blocks++
			if v, ok := first.Values[0].(*ast.Ident); !ok || v.Name != "iota" || len(first.Values) != 1 {
				t.Errorf("%s: the first kind is not = iota", fset.Position(first.Pos()))
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				if s != g.Specs[0] && (len(vs.Values) != 0 || vs.Type != nil) {
					t.Errorf("%s: %s has a value or type of its own: kinds are numbered by iota alone", fset.Position(vs.Pos()), vs.Names[0])
				}
				for _, n := range vs.Names {
					names = append(names, n.Name)
				}
			}
		}
	}
	if blocks != 1 {
		t.Fatalf("%d sysKind const blocks in kinds.go, want 1", blocks)
	}
	if len(names) < 40 {
		t.Fatalf("found %d kinds: the scan missed the block", len(names))
	}

}

// Every call of sysCalls has one row and a number in seccomp's table on at
// least one architecture (a misspelt name would have none, and its
// handler would never be reached); no two calls share a native number.
func TestSysCallsNumbered(t *testing.T) {
	seen := map[string]bool{}
	native := 0
	arch, archErr := seccomp.NativeArch()
	for _, e := range sysCalls {
		if seen[e.name] {
			t.Errorf("%s has two rows", e.name)
		}
		seen[e.name] = true
		_, amd := seccomp.Number(seccomp.AMD64, e.name)
		_, arm := seccomp.Number(seccomp.ARM64, e.name)
		if !amd && !arm {
			t.Errorf("%s has no number in seccomp's table", e.name)
		}
		if _, ok := seccomp.Number(arch, e.name); ok && archErr == nil {
			native++
		}
	}
	if len(sysTable) != native {
		t.Errorf("sysTable has %d calls, %d of sysCalls have a native number", len(sysTable), native)
	}
}
