package confine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the module may be, not
// counting the lines of the tables it holds (issue 25).
const maxFuncLines = 110

// funcLength is one function's length.
type funcLength struct {
	file  string
	where string // file:line
	name  string
	lines int // its lines, tables aside
	table int // lines of table literals in it
}

// funcLengths measures every function and method in the module's non-test
// Go files. A table is a slice, array or map literal of at least
// minTableRows elements, or a literal row appended to one: its lines do
// not count (a table grows by rows, and rows are data).
func funcLengths(root string) ([]funcLength, error) {
	const minTableRows = 4
	var out []funcLength
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "python") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		line := func(p token.Pos) int { return fset.Position(p).Line }
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			table := map[int]bool{}
			rows := func(from, to token.Pos) {
				for l := line(from); l <= line(to); l++ {
					table[l] = true
				}
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CompositeLit:
					switch n.Type.(type) {
					case *ast.ArrayType, *ast.MapType:
						if len(n.Elts) >= minTableRows {
							rows(n.Elts[0].Pos(), n.Elts[len(n.Elts)-1].End())
							return false
						}
					}
				case *ast.CallExpr:
					// append(table, row, row...): rows added to a table.
					if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "append" && len(n.Args) > 1 {
						for _, a := range n.Args[1:] {
							if lit, ok := a.(*ast.CompositeLit); ok {
								rows(lit.Pos(), lit.End())
							}
						}
					}
				}
				return true
			})
			name := fn.Name.Name
			if fn.Recv != nil && len(fn.Recv.List) > 0 {
				name = fmt.Sprintf("(%s).%s", typeName(fn.Recv.List[0].Type), name)
			}
			total := line(fn.End()) - line(fn.Pos()) + 1
			out = append(out, funcLength{
				file:  filepath.ToSlash(path),
				where: fmt.Sprintf("%s:%d", filepath.ToSlash(path), line(fn.Pos())),
				name:  name, lines: total - len(table), table: len(table),
			})
		}
		return nil
	})
	slices.SortFunc(out, func(a, b funcLength) int { return b.lines - a.lines })
	return out, err
}

func typeName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return "*" + typeName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.IndexExpr:
		return typeName(e.X)
	case *ast.IndexListExpr:
		return typeName(e.X)
	}
	return "?"
}

// No function is over maxFuncLines lines, tables aside. `go test -run
// TestFunctionLength -v .` lists the twenty longest.
func TestFunctionLength(t *testing.T) {
	fl, err := funcLengths(".")
	if err != nil {
		t.Fatal(err)
	}
	if len(fl) < 100 {
		t.Fatalf("measured only %d functions", len(fl))
	}
	for i, f := range fl {
		if i < 20 {
			t.Logf("%4d lines (+%d of tables) %s %s", f.lines, f.table, f.where, f.name)
		}
		if f.lines > maxFuncLines {
			t.Errorf("%s: %s has %d lines (tables aside), over %d: split it", f.where, f.name, f.lines, maxFuncLines)
		}
	}
}

// No package exports a variable holding a slice, map or composite value
// (a caller could change what every other caller sees): such a list is
// unexported, with a function returning a copy. Sentinel errors and
// injected functions are variables of other kinds and stay.
func TestNoMutableExportedLists(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "python") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !n.IsExported() {
						continue
					}
					_, listType := vs.Type.(*ast.ArrayType)
					_, mapType := vs.Type.(*ast.MapType)
					lit := false
					if i < len(vs.Values) {
						_, lit = vs.Values[i].(*ast.CompositeLit)
					}
					if !listType && !mapType && !lit {
						continue
					}
					t.Errorf("%s: exported variable %s holds a list or composite value: unexport it and export a function returning a copy", path, n.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
