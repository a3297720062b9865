package confine_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"testing"
)

// plannerCalls are the planner functions a file calls.
func plannerCalls(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var calls []string
	ast.Inspect(f, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "planner" {
					calls = append(calls, sel.Sel.Name)
				}
			}
		}
		return true
	})
	return calls
}

// Linux and macOS validate a run with the same code: Linux's launch calls
// planner.Validate (which calls planner.CheckRun, walked by one table in
// internal/planner on both OSes' builds), macOS's calls planner.CheckRun,
// and neither calls the checks CheckRun is made of on its own.
func TestLaunchesShareValidation(t *testing.T) {
	parts := []string{"CheckWritableRoots", "CheckControl", "GitGuard", "CommandEnv", "LookPath"}
	for _, tc := range []struct{ file, want string }{{"internal/linuxrun/launch.go", "Validate"}, {"internal/seatbelt/launch_darwin.go", "CheckRun"}} {
		calls := plannerCalls(t, tc.file)
		if !slices.Contains(calls, tc.want) {
			t.Errorf("%s does not call planner.%s (calls %v)", tc.file, tc.want, calls)
		}
		for _, p := range parts {
			if slices.Contains(calls, p) {
				t.Errorf("%s calls planner.%s itself: its validation is planner.%s's", tc.file, p, tc.want)
			}
		}
	}
}
