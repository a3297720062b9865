package confine_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The layout table (docs/layout.md) lists every package once, and only those.
func TestLayoutMatchesPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Skipf("go list unavailable (%v): the layout cannot be checked here", err)
	}
	var pkgs []string
	for _, l := range strings.Fields(string(out)) {
		_, rel, _ := strings.Cut(l, "github.com/confine-sandbox/confine")
		rel = strings.TrimPrefix(rel, "/")
		if rel == "" {
			rel = "confine"
		}
		pkgs = append(pkgs, rel)
	}
	b, err := os.ReadFile("docs/layout.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	// The table ends where the next section (Dependencies) starts.
	if j := strings.Index(s, "\n## "); j >= 0 {
		s = s[:j+1]
	}
	row := regexp.MustCompile("(?m)^\\| `([^`]+)`")
	var listed []string
	for _, m := range row.FindAllStringSubmatch(s, -1) {
		listed = append(listed, m[1])
	}
	slices.Sort(pkgs)
	sorted := slices.Clone(listed)
	slices.Sort(sorted)
	if !slices.Equal(sorted, pkgs) {
		t.Errorf("docs/layout.md lists %v\ngo list has %v", sorted, pkgs)
	}
	if len(slices.Compact(sorted)) != len(listed) {
		t.Errorf("a package is listed twice: %v", listed)
	}
}
