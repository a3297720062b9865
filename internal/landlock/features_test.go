package landlock

import "testing"

// The table is ordered by ABI, names are unique, and every right the
// ruleset handles comes from exactly one row.
func TestFeatureTable(t *testing.T) {
	seen := map[string]bool{}
	var all uint64
	for i, f := range features {
		if f.ABI != i+1 {
			t.Errorf("row %d (%s) has ABI %d; rows are one per ABI, in order", i, f.Name, f.ABI)
		}
		if seen[f.Name] {
			t.Errorf("duplicate feature %s", f.Name)
		}
		seen[f.Name] = true
		if all&f.FS != 0 {
			t.Errorf("%s repeats a right of an earlier ABI", f.Name)
		}
		all |= f.FS
		if got, ok := FeatureByName(f.Name); !ok || got.ABI != f.ABI || !Has(f.ABI, f.Name) || Has(f.ABI-1, f.Name) {
			t.Errorf("lookup of %s inconsistent", f.Name)
		}
	}
	if handledFS(len(features)) != all {
		t.Errorf("handledFS(newest) = %#x, want every right %#x", handledFS(len(features)), all)
	}
	if _, ok := FeatureByName("nope"); ok || Has(99, "nope") {
		t.Error("an unknown feature was found")
	}
}
