package confine_test

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/confine-sandbox/confine"

// relPackage is an import path relative to the module; the root is
// "confine".
func relPackage(p string) string {
	_, rel, _ := strings.Cut(p, module)
	if rel = strings.TrimPrefix(rel, "/"); rel == "" {
		return "confine"
	}
	return rel
}

// The layout table (docs/layout.md) lists every package once, and only those.
func TestLayoutMatchesPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "./...").Output()
	if err != nil {
		t.Skipf("go list unavailable (%v): the layout cannot be checked here", err)
	}
	var pkgs []string
	for _, l := range strings.Fields(string(out)) {
		pkgs = append(pkgs, relPackage(l))
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

// The stage table of docs/architecture.md is the stages' import graph:
// every package in one stage, and each stage importing from exactly the
// stages it lists (besides its own), on linux and on darwin.
func TestArchitectureMatchesImports(t *testing.T) {
	b, err := os.ReadFile("docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| ([a-z]+) \\| (`.*`) \\| (.*) \\|$")
	stageOf := map[string]string{}
	listed := map[string][]string{}
	var stages []string
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		stage := m[1]
		stages = append(stages, stage)
		for _, p := range strings.Split(m[2], ", ") {
			p = strings.Trim(p, "`")
			if prev, ok := stageOf[p]; ok {
				t.Errorf("%s is in stages %s and %s", p, prev, stage)
			}
			stageOf[p] = stage
		}
		if m[3] != "—" {
			listed[stage] = strings.Split(m[3], ", ")
		}
	}
	if len(stages) < 7 {
		t.Fatalf("docs/architecture.md: found %d stage rows, want the seven stages and more", len(stages))
	}
	uses := map[string][]string{}
	seen := map[string]bool{}
	for _, goos := range []string{"linux", "darwin"} {
		cmd := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
		cmd.Env = append(os.Environ(), "GOOS="+goos)
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("go list unavailable (%v): the stages cannot be checked here", err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(l)
			seen[relPackage(f[0])] = true
			from, ok := stageOf[relPackage(f[0])]
			if !ok {
				t.Errorf("%s is in no stage of docs/architecture.md", relPackage(f[0]))
				continue
			}
			for _, imp := range f[1:] {
				if !strings.HasPrefix(imp, module) {
					continue
				}
				to := stageOf[relPackage(imp)]
				if to == from || slices.Contains(uses[from], to) {
					continue
				}
				uses[from] = append(uses[from], to)
				if !slices.Contains(listed[from], to) {
					t.Errorf("%s (%s) imports %s (%s), which docs/architecture.md does not list", relPackage(f[0]), from, relPackage(imp), to)
				}
			}
		}
	}
	for p := range stageOf {
		if !seen[p] {
			t.Errorf("docs/architecture.md names %s, which go list does not have", p)
		}
	}
	for _, s := range stages {
		for _, to := range listed[s] {
			if !slices.Contains(uses[s], to) {
				t.Errorf("docs/architecture.md: %s lists %s, which none of its packages imports", s, to)
			}
		}
	}
}
