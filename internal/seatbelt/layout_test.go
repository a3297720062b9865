package seatbelt

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestLayout(t *testing.T) {
	c := macTree(t)
	l, err := c.Layout(Roots{Worktree: "/var/folders/x1/abc/T/w", Dir: "/Users/dev/src/app",
		ReadOnly: []string{"/Users/dev"}, ReadWrite: []string{"/tmp"}})
	if err != nil {
		t.Fatal(err)
	}
	w := "/private/var/folders/x1/abc/T/w"
	if l.Worktree != w || l.Dir != w {
		t.Errorf("worktree %q, dir %q; want both %q", l.Worktree, l.Dir, w)
	}
	if !slices.Equal(l.Writable, []string{w, "/private/tmp"}) {
		t.Errorf("writable %v", l.Writable)
	}
	if !slices.Contains(l.ReadExec, "/Users/dev") || !slices.Contains(l.ReadExec, "/System") {
		t.Errorf("read roots %v", l.ReadExec)
	}
	for _, d := range []string{"/Users/dev/.npmrc", "/Users/dev/dotfiles/npmrc", "/Users/dev/.ssh"} {
		if !slices.Contains(l.Deny, d) {
			t.Errorf("deny lacks %s: %v", d, l.Deny)
		}
	}
	p, err := Generate(l.Spec("/private/var/folders/x1/abc/T/confine-1", Devices()))
	if err != nil {
		t.Fatal(err)
	}
	for _, unresolved := range []string{`"/tmp`, `"/var/`, `"/etc/`} {
		if strings.Contains(p, unresolved) {
			t.Errorf("profile embeds an unresolved path %s...:\n%s", unresolved, p)
		}
	}
	if !strings.Contains(p, `(subpath "/private/tmp")`) {
		t.Errorf("the asked-for /tmp root is not granted as /private/tmp:\n%s", p)
	}
}

// TestLayoutFailsClosed: every path that cannot be canonicalised fails the
// run, naming its role; so does a dir outside the worktree.
func TestLayoutFailsClosed(t *testing.T) {
	c := macTree(t)
	ok := Roots{Worktree: "/var/folders/x1/abc/T/w"}
	for _, tc := range []struct {
		name  string
		mod   func(*Roots)
		role  string
		canon bool
	}{
		{"worktree dangling", func(r *Roots) { r.Worktree = "/Users/dev/dangling" }, "worktree", true},
		{"worktree relative", func(r *Roots) { r.Worktree = "w" }, "worktree", true},
		{"dir loop", func(r *Roots) { r.Dir = "/Users/dev/loop" }, "dir", true},
		{"dir outside", func(r *Roots) { r.Dir = "/Users/dev" }, "outside worktree", false},
		{"ro missing", func(r *Roots) { r.ReadOnly = []string{"/Users/dev", "/nope"} }, "read-only root", true},
		{"rw missing", func(r *Roots) { r.ReadWrite = []string{"/tmp/nope"} }, "read-write root", true},
	} {
		r := ok
		tc.mod(&r)
		_, err := c.Layout(r)
		if !errors.Is(err, spec.ErrInvalidSpec) || errors.Is(err, ErrCanonical) != tc.canon || !strings.Contains(fmtErr(err), tc.role) {
			t.Errorf("%s: Layout = %v; want ErrInvalidSpec naming %q (ErrCanonical %v)", tc.name, err, tc.role, tc.canon)
		}
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
