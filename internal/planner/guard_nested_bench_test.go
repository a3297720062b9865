//go:build unix

package planner

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkNestedGit times the look for nested repositories in the tree
// $CONFINE_BENCH_TREE (a work tree of the size a run is launched in).
func BenchmarkNestedGit(b *testing.B) {
	tree := os.Getenv("CONFINE_BENCH_TREE")
	if tree == "" {
		b.Skip("set CONFINE_BENCH_TREE to a directory to walk")
	}
	root, err := filepath.EvalSymlinks(tree)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		budget := maxGuardWalk
		if _, err := nestedGit(root, []string{root}, nil, &budget); err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(maxGuardWalk-budget), "entries")
	}
}
