package planner

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// TestLookupInUsesTheCallersEnvironment: a recipe resolved for another
// process finds its toolchain on that process's PATH, not on this one's.
func TestLookupInUsesTheCallersEnvironment(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("not applicable: no go on this PATH (%v)", err)
	}
	home := t.TempDir()
	// go env under this HOME would start Go's telemetry there, and its
	// upload child can outlive go env and race the temporary directory's
	// removal (seen once): telemetry off in this HOME, as `go telemetry
	// off` would write it.
	modeDir := filepath.Join(home, ".config", "go", "telemetry")
	if err := os.MkdirAll(modeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modeDir, "mode"), []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		path    string
		refused string // "" : resolves
	}{
		{"PATH with go", filepath.Dir(goBin) + ":/usr/bin:/bin", ""},
		{"PATH without go", "/nonexistent", "go not found on PATH"},
		{"relative entry only", "bin", "go not found on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"PATH=" + tt.path, "HOME=" + home}
			p, err := policy.LookupIn("go", env)
			if tt.refused != "" {
				if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("LookupIn: %v, want a refusal saying %q", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// go env answered with the caller's HOME: its module cache
			// is under it.
			if p.Name != "go" || !strings.Contains(p.Description, filepath.Join(home, "go", "pkg", "mod")) {
				t.Fatalf("profile %+v, want the module cache under the caller's HOME %s", p, home)
			}
			// The same environment again: the kept result.
			if q, err := policy.LookupIn("go", env); err != nil || q.Digest() != p.Digest() {
				t.Fatalf("second LookupIn: %v, digest %s vs %s", err, q.Digest(), p.Digest())
			}
		})
	}
	// Not a recipe: as Lookup.
	if p, err := policy.ResolveProfileIn("default", nil); err != nil || p.Name != "default" {
		t.Fatalf("policy.ResolveProfileIn(default): %+v, %v", p, err)
	}
	if !policy.IsRecipe("go") || policy.IsRecipe("default") {
		t.Fatal("IsRecipe")
	}
	if _, err := lookPathIn("/nonexistent:"+filepath.Dir(goBin), "go"); err != nil {
		t.Fatalf("lookPathIn: %v", err)
	}
	if _, err := os.Stat(goBin); err != nil {
		t.Fatal(err)
	}
}

// Discovery commands run in "/" with the caller's environment plus what
// the recipe adds, and a failure says what the tool printed.
func TestRunTool(t *testing.T) {
	out, err := runTool([]string{"CONFINE_RECIPE_TEST=yes"}, "/bin/sh", "-c", `pwd; echo "$CONFINE_RECIPE_TEST"`)
	if err != nil || string(out) != "/\nyes\n" {
		t.Fatalf("got %q, %v", out, err)
	}
	_, err = runTool(nil, "/bin/sh", "-c", "echo something broke >&2; exit 3")
	if err == nil || !strings.Contains(err.Error(), "something broke") {
		t.Fatalf("err = %v", err)
	}
	_, err = runTool(nil, "/bin/sh", "-c", "head -c 2000000 /dev/zero")
	if err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("err = %v", err)
	}
}
