//go:build linux

package nsinit

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
)

func TestMappings(t *testing.T) {
	for _, tt := range []struct {
		euid, egid, uid, gid int
		uids, gids           []int
		setgroups            bool
	}{
		{1000, 1000, -1, -1, []int{1000}, []int{1000}, false},
		{0, 0, -1, -1, []int{0}, []int{0}, true},
		{0, 0, 0, 0, []int{0}, []int{0}, true},
		{0, 0, 1000, 100, []int{0, 1000}, []int{0, 100}, true},
	} {
		uids, gids, sg := Mappings(tt.euid, tt.egid, tt.uid, tt.gid)
		if !reflect.DeepEqual(uids, tt.uids) || !reflect.DeepEqual(gids, tt.gids) || sg != tt.setgroups {
			t.Errorf("Mappings(%d, %d, %d, %d) = %v %v %v", tt.euid, tt.egid, tt.uid, tt.gid, uids, gids, sg)
		}
	}
}

// Which directories get a tmpfs, and which roots come back beneath them:
// the outermost ones only, resolved, and none when a root holds the
// directory itself.
func TestCoversAndRebinds(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	mk := func(p string) string {
		p = filepath.Join(base, p)
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hidden := mk("hidden")
	private := mk("private")
	inRoot := mk("root/inside")
	a, ab := mk("hidden/a"), mk("hidden/a/b")
	file := filepath.Join(hidden, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	other := mk("elsewhere")
	link := filepath.Join(hidden, "link")
	if err := os.Symlink(other, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hidden, filepath.Join(base, "symlinked")); err != nil {
		t.Fatal(err)
	}
	ns := &plan.Namespaces{
		Private: []string{private},
		Hide:    []string{hidden, inRoot, filepath.Join(base, "symlinked"), filepath.Join(base, "missing")},
	}
	roots := []string{ab, a, file, link, other, filepath.Join(base, "root"), filepath.Join(hidden, "gone")}
	l := PlanLayout(ns, roots, nil)
	var dirs []string
	for _, c := range l.Covers {
		dirs = append(dirs, c.Dir())
	}
	// inRoot lies in a root; the symlink and the missing path are no
	// directories.
	if want := []string{private, hidden}; !reflect.DeepEqual(dirs, want) {
		t.Fatalf("covers %v, want %v", dirs, want)
	}
	var got []string
	for _, b := range l.Binds {
		got = append(got, b.Path)
	}
	if want := []string{a, file}; !reflect.DeepEqual(got, want) {
		t.Errorf("binds %v, want %v (a/b comes back with a; the link's target is elsewhere)", got, want)
	}
	links := l.Links
	if want := [][2]string{{link, other}}; !reflect.DeepEqual(links, want) {
		t.Errorf("links %v, want %v", links, want)
	}
}
