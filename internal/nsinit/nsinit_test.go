//go:build linux

package nsinit

import (
	"fmt"
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

// The new root holds the roots (resolved, outermost, a writable one
// again inside a read-only one), the symlinks on the way to them, the /dev
// links, and the private directories not within a root.
func TestPlanLayout(t *testing.T) {
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
	a, ab, inner, git := mk("a"), mk("a/b"), mk("a/inner"), mk("a/inner/.git")
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	real := mk("real/sub")
	link := filepath.Join(base, "link")
	if err := os.Symlink("real", link); err != nil {
		t.Fatal(err)
	}
	ns := &plan.Namespaces{Private: []string{"/dev/shm", filepath.Join(base, "a/private"), filepath.Join(base, "shm")}}
	p := &plan.Plan{Namespaces: ns, Landlock: plan.Landlock{
		ReadExec:  []string{ab, a, file, filepath.Join(link, "sub"), "/proc/cpuinfo", filepath.Join(base, "missing")},
		ReadWrite: []string{inner, filepath.Join(base, "shm/x")},
		Devices:   []string{"/dev/null"},
	}, Guarded: []string{git}}
	mk("shm/x")
	l := PlanLayout(p, nil)
	var got []string
	for _, b := range l.Binds {
		got = append(got, fmt.Sprintf("%s %d %v", b.Path, b.Kind, b.Dir))
	}
	want := []string{
		"/dev/null 2 false",
		a + " 0 true", // a/b comes with a
		inner + " 1 true",
		git + " 3 true", // read-only over the writable root: never dropped
		file + " 0 false",
		real + " 0 true",
		filepath.Join(base, "shm/x") + " 1 true",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("binds\n%q\nwant\n%q", got, want)
	}
	wantLinks := [][2]string{{"/dev/fd", "/proc/self/fd"}, {"/dev/stderr", "/proc/self/fd/2"},
		{"/dev/stdin", "/proc/self/fd/0"}, {"/dev/stdout", "/proc/self/fd/1"}, {link, "real"}}
	if !reflect.DeepEqual(l.Links, wantLinks) {
		t.Errorf("links %q, want %q", l.Links, wantLinks)
	}
	// a/private lies within a root: left as granted. shm has a root
	// beneath it: a tmpfs, but not writable (Landlock follows paths
	// through mounts).
	var dirs []string
	for _, c := range l.Private {
		dirs = append(dirs, c.Dir())
	}
	if want := []string{"/dev/shm", filepath.Join(base, "shm")}; !reflect.DeepEqual(dirs, want) {
		t.Errorf("private %q, want %q", dirs, want)
	}
	if w := l.WritablePrivate(); !reflect.DeepEqual(w, []string{"/dev/shm"}) {
		t.Errorf("writable private %q", w)
	}
	if !l.Shows(filepath.Join(a, "b/c")) || l.Shows(filepath.Join(base, "real")) || l.Shows("/etc") {
		t.Errorf("Shows: wrong for %s/b/c, %s/real or /etc", a, base)
	}
}

func TestParents(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"/", nil},
		{"/a", nil},
		{"/a/b/c", []string{"/a", "/a/b"}},
	} {
		if got := Parents(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Parents(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
