//go:build linux

package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUserNSRestriction(t *testing.T) {
	dir := t.TempDir()
	write := func(v string) string {
		p := filepath.Join(dir, "sysctl-"+v)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	on, off := write("1"), write("0")
	for _, tt := range []struct {
		name string
		path string
		euid int
		want string
	}{
		{"ubuntu, unprivileged", on, 1000, "AppArmor"},
		{"ubuntu, root is exempt", on, 0, ""},
		{"switch off", off, 1000, ""},
		{"no such switch (not Ubuntu)", filepath.Join(dir, "absent"), 1000, ""},
	} {
		got := userNSRestriction(tt.path, tt.euid)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
