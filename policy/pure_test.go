package policy

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// policy decides; it runs no host program and holds no key material.
// Recipe discovery asks the host through internal/toolhost (package
// confine installs it), and the capability cryptography is
// internal/token's.
func TestPolicyImportsNoHostProgramsOrCryptography(t *testing.T) {
	forbidden := map[string]string{
		"os/exec":       "host programs run on the planning side (toolhost.go in package confine)",
		"os/user":       "the host's user database is read on the planning side (toolhost.go)",
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
