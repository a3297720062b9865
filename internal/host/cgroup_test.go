//go:build linux

package host

import (
	"os"
	"path/filepath"
	"testing"
)

// TestPidsCgroupV1 walks the layouts a per-run pids cgroup can have.
func TestPidsCgroupV1(t *testing.T) {
	cases := []struct {
		name  string
		files []string // created in the cgroup directory; nil: no directory
		want  bool
	}{
		{name: "v1 hierarchy", files: []string{"tasks", "cgroup.procs", "pids.max"}, want: true},
		{name: "v2 hierarchy", files: []string{"cgroup.procs", "pids.max"}},
		{name: "empty directory", files: []string{}},
		{name: "missing directory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			if c.files != nil {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				for _, f := range c.files {
					if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			if got := PidsCgroupV1(dir); got != c.want {
				t.Errorf("PidsCgroupV1 = %v, want %v", got, c.want)
			}
		})
	}
}
