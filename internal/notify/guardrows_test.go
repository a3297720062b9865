//go:build linux

package notify

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/guardset"
)

func TestRefusedRow(t *testing.T) {
	rows := []guardset.Entry{{Name: "makefile", Pattern: "**/Makefile"}, {Name: "cirun", Pattern: "ci/run.sh"}}
	p := policy{roots: []string{"/w", "/w/sub", "/tmp"}, rows: rows}
	for _, c := range []struct {
		dir, name, want string
	}{
		{"/w", "Makefile", "makefile"},
		{"/w/a/b", "makefile", "makefile"}, // case folded
		{"/w/ci", "run.sh", "cirun"},
		{"/w/ci", "run.sh/", "cirun"},
		{"/w/x/ci", "run.sh", ""},
		{"/w/sub/ci", "run.sh", "cirun"}, // relative to the inner root
		{"/w", "ci", ""},
		{"/other", "Makefile", ""}, // outside every root
		{"/wx", "Makefile", ""},
		{"/w", "..", ""},
	} {
		e, _, ok := p.refusedRow(c.dir, c.name)
		if got := map[bool]string{true: e.Name}[ok]; got != c.want {
			t.Errorf("refusedRow(%q, %q) = %q, want %q", c.dir, c.name, got, c.want)
		}
	}
	if _, _, ok := (&policy{roots: []string{"/"}, rows: rows}).refusedRow("/", "Makefile"); !ok {
		t.Error("a root of / does not refuse /Makefile")
	}
	if _, _, ok := (&policy{roots: []string{"/w"}}).refusedRow("/w", "Makefile"); ok {
		t.Error("refused without rows")
	}
}
