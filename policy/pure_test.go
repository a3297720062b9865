package policy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// policy decides; it runs no host program and holds no key material.
// Recipe discovery asks the host through internal/toolhost
// (internal/planner installs it), and the capability cryptography is
// internal/token's.
func TestPolicyImportsNoHostProgramsOrCryptography(t *testing.T) {
	forbidden := map[string]string{
		"os/exec":       "host programs run on the planning side (internal/planner/toolhost.go)",
		"os/user":       "the host's user database is read on the planning side (internal/planner/toolhost.go)",
		"crypto/hmac":   "capability and grant MACs are internal/token's",
		"crypto/rand":   "keys and ids come from internal/token",
		"crypto/subtle": "comparisons of MACs are internal/token's",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range ast.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if why, bad := forbidden[path]; bad {
				t.Errorf("%s imports %s: %s", f, path, why)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}

// policy exports what its users need and no more (issue 25: at most 45
// names): every exported constant, variable, type and function at top
// level counts, methods do not.
func TestPolicyExportsFewNames(t *testing.T) {
	const most = 45
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range file.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					names = append(names, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							names = append(names, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
								if d.Tok == token.VAR {
									t.Errorf("%s: exported variable %s (a caller could change it; export a function returning a copy)", f, n.Name)
								}
							}
						}
					}
				}
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("no exported names found")
	}
	if len(names) > most {
		t.Errorf("policy exports %d names, at most %d: %v", len(names), most, names)
	}
	t.Logf("policy exports %d names", len(names))
}
