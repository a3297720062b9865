//go:build linux

package planner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/internal/persist"
	"github.com/confine-sandbox/confine/spec"
)

// TestProfileGuard walks a table of profiles' [guard] changes over one
// work tree (and a second writable root): the paths kept read-only, the
// paths the persistence report watches, and the refusals.
func TestProfileGuard(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	must(t, err)
	w, other := filepath.Join(base, "w"), filepath.Join(base, "other")
	for _, f := range []string{"Makefile", "src/Makefile", ".envrc", "sub/.envrc", ".git/Makefile", "vendor/lib/.git/x/Makefile",
		"ci/run.sh", "src/ci/run.sh", ".idea/runConfigurations/a.xml", "build/Makefile/inner"} {
		p := filepath.Join(w, f)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, nil, 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(other, "x"), 0o755))
	must(t, os.WriteFile(filepath.Join(other, "x", "Makefile"), nil, 0o644))
	must(t, os.Symlink("Makefile", filepath.Join(w, "src", "link")))
	mk := guardset.Entry{Name: "makefile", Pattern: "**/Makefile", Default: guardset.Refuse}
	ci := guardset.Entry{Name: "ci", Pattern: "ci/run.sh", Default: guardset.Report}
	for _, c := range []struct {
		name    string
		changes *guardset.Changes // nil: no [guard]
		rw      []string
		keep    []string // relative to base
		watch   []string // relative to w
		refused string
	}{
		{name: "no [guard]: no walk", rw: []string{w}},
		{name: "editor row refused", changes: &guardset.Changes{Refuse: []string{"envrc"}}, rw: []string{w},
			keep: []string{"w/.envrc", "w/sub/.envrc"}, watch: []string{".envrc", "sub/.envrc"}},
		{name: "directory row refused", changes: &guardset.Changes{Refuse: []string{"idea-run-configurations"}}, rw: []string{w},
			keep: []string{"w/.idea/runConfigurations"}, watch: []string{".idea/runConfigurations"}},
		{name: "added refused, two roots, not into .git", changes: &guardset.Changes{Add: []guardset.Entry{mk}}, rw: []string{w, other},
			keep:  []string{"other/x/Makefile", "w/Makefile", "w/build/Makefile", "w/src/Makefile"},
			watch: []string{"Makefile", "build/Makefile", "src/Makefile"}},
		{name: "added reported", changes: &guardset.Changes{Add: []guardset.Entry{ci}}, rw: []string{w},
			watch: []string{"ci/run.sh"}},
		{name: "git row reported: nothing here (gitGuard's waiver)", changes: &guardset.Changes{Report: []string{"git-hooks"}}, rw: []string{w}},
		{name: "symlink matching a refused row", changes: &guardset.Changes{Add: []guardset.Entry{{Name: "link", Pattern: "src/link", Default: guardset.Refuse}}},
			rw: []string{w}, refused: "is a symlink"},
		{name: "symlink named for a refused pattern's directory", changes: &guardset.Changes{Add: []guardset.Entry{{Name: "viasrc", Pattern: "src/link/run.sh", Default: guardset.Refuse}}},
			rw: []string{w}, refused: "could lead"},
		{name: "writable root inside a refused path", changes: &guardset.Changes{Add: []guardset.Entry{{Name: "build", Pattern: "build", Default: guardset.Refuse}}},
			rw: []string{w, filepath.Join(w, "build", "Makefile")}, refused: "lies inside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var g guardset.Policy
			if c.changes != nil {
				g, err = guardset.New(false, *c.changes)
				must(t, err)
			}
			guarded := []string{filepath.Join(w, ".git"), filepath.Join(w, "vendor", "lib", ".git")}
			keep, watch, err := ProfileGuard(c.rw, w, guarded, c.changes != nil, g)
			if c.refused != "" {
				if !errors.Is(err, ErrGuard) || !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), c.refused) {
					t.Fatalf("err = %v, want a guard refusal naming %q", err, c.refused)
				}
				return
			}
			must(t, err)
			var gotKeep []string
			for _, k := range keep {
				r, _ := filepath.Rel(base, k)
				gotKeep = append(gotKeep, r)
			}
			slices.Sort(gotKeep)
			if !slices.Equal(gotKeep, c.keep) {
				t.Errorf("kept %v, want %v", gotKeep, c.keep)
			}
			var gotWatch []string
			for _, x := range watch {
				if !slices.Contains(gotWatch, x.Path) {
					gotWatch = append(gotWatch, x.Path)
				}
			}
			slices.Sort(gotWatch)
			if !slices.Equal(gotWatch, c.watch) {
				t.Errorf("watched %v, want %v", gotWatch, c.watch)
			}
			// The report sees a change to a watched path.
			if len(watch) > 0 {
				before := persist.TakeWith(w, watch)
				p := filepath.Join(w, watch[0].Path)
				if st, err := os.Stat(p); err == nil && !st.IsDir() {
					must(t, os.WriteFile(p, []byte("changed"), 0o644))
					d := persist.Diff(before, persist.TakeWith(w, watch))
					if len(d) != 1 || d[0].Path != watch[0].Path {
						t.Errorf("report after changing %s: %+v", watch[0].Path, d)
					}
					must(t, os.WriteFile(p, nil, 0o644))
				}
			}
		})
	}
}
