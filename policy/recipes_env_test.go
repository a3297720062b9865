package policy

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

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
			p, err := LookupIn("go", env)
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
			if q, err := LookupIn("go", env); err != nil || q.Digest() != p.Digest() {
				t.Fatalf("second LookupIn: %v, digest %s vs %s", err, q.Digest(), p.Digest())
			}
		})
	}
	// Not a recipe: as Lookup.
	if p, err := ResolveProfileIn("default", nil); err != nil || p.Name != "default" {
		t.Fatalf("ResolveProfileIn(default): %+v, %v", p, err)
	}
	if !IsRecipe("go") || IsRecipe("default") {
		t.Fatal("IsRecipe")
	}
	if _, err := lookPathIn("/nonexistent:"+filepath.Dir(goBin), "go"); err != nil {
		t.Fatalf("lookPathIn: %v", err)
	}
	if _, err := os.Stat(goBin); err != nil {
		t.Fatal(err)
	}
}

// TestResolutionCache: one cache serves this process's environment and
// the others; each (recipe, environment) is discovered once, and evicting
// other environments never drops this process's answers.
func TestResolutionCache(t *testing.T) {
	calls := map[string]int{}
	r := &recipe{name: "x", discover: func(h *toolHost) (toolchain, error) {
		calls[h.getenv("WHO")]++
		return toolchain{}, unavailable("x", "x not found on PATH")
	}}
	proc := &toolHost{getenv: func(string) string { return "process" }}
	env := func(i int) [32]byte { return [32]byte{1, byte(i)} }
	in := func(i int) *toolHost {
		return &toolHost{getenv: func(string) string { return fmt.Sprint("env", i) }}
	}
	steps := []struct {
		name string
		do   func()
		want map[string]int
	}{
		{"process twice", func() { r.resolve(proc); r.resolve(proc) }, map[string]int{"process": 1}},
		{"one environment twice", func() { r.resolveIn(env(0), in(0)); r.resolveIn(env(0), in(0)) }, map[string]int{"process": 0, "env0": 1}},
		{"fill and evict", func() {
			for i := range maxEnvResolutions + 1 {
				r.resolveIn(env(i), in(i))
			}
		}, map[string]int{"process": 0, "env0": 0, "env1": 1}},
		{"evicted environment again", func() { r.resolveIn(env(0), in(0)) }, map[string]int{"env0": 1}},
		{"process kept", func() { r.resolve(proc) }, map[string]int{"process": 0}},
	}
	for _, s := range steps {
		clear(calls)
		s.do()
		for who, n := range s.want {
			if calls[who] != n {
				t.Errorf("%s: %s discovered %d times, want %d (all: %v)", s.name, who, calls[who], n, calls)
			}
		}
	}
	t.Cleanup(func() {
		resolutionsMu.Lock()
		defer resolutionsMu.Unlock()
		maps.DeleteFunc(resolutions, func(k resolutionKey, _ *resolution) bool { return k.r == r })
	})
}
