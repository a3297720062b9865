package confine_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The README's layout table lists every package once, and only those.
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
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "## Layout\n")
	if i < 0 {
		t.Fatal("README has no Layout section")
	}
	s = s[i:]
	if j := strings.Index(s[1:], "\n## "); j >= 0 {
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
		t.Errorf("README layout lists %v\ngo list has %v", sorted, pkgs)
	}
	if len(slices.Compact(sorted)) != len(listed) {
		t.Errorf("a package is listed twice: %v", listed)
	}
}
