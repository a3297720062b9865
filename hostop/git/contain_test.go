//go:build linux

package git

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/hostop"
)

// TestContainGitDir: every shape of .git that would have git read a file
// outside the root is refused; the same shapes staying inside pass.
func TestContainGitDir(t *testing.T) {
	rows := []struct {
		name  string
		setup func(t *testing.T, root, out string)
		bad   bool
	}{
		{"plain", func(t *testing.T, root, out string) {}, false},
		{"packed-refs-out", link("/OUT/secret", ".git/packed-refs"), true},
		{"config-out", link("/OUT/secret", ".git/config"), true},
		{"head-out", link("/OUT/secret", ".git/HEAD"), true},
		{"index-out", link("/OUT/secret", ".git/index"), true},
		{"ref-out", link("/OUT/secret", ".git/refs/heads/main"), true},
		{"ref-relative-out", link("../../../../outside/secret", ".git/refs/heads/main"), true},
		{"info-out", link("/OUT/secret", ".git/info/exclude"), true},
		{"commondir-out", link("/OUT/secret", ".git/commondir"), true},
		{"gitdir-out", link("/OUT/secret", ".git/gitdir"), true},
		{"refs-dir-out", func(t *testing.T, root, out string) {
			must(t, os.RemoveAll(filepath.Join(root, ".git/refs")))
			must(t, os.Symlink(out, filepath.Join(root, ".git/refs")))
		}, true},
		{"refs-dir-in-then-out", func(t *testing.T, root, out string) {
			// .git/refs -> ../elsewhere, whose file leads out.
			must(t, os.MkdirAll(filepath.Join(root, "elsewhere/heads"), 0o755))
			must(t, os.Symlink(filepath.Join(out, "secret"), filepath.Join(root, "elsewhere/heads/main")))
			must(t, os.RemoveAll(filepath.Join(root, ".git/refs")))
			must(t, os.Symlink("../elsewhere", filepath.Join(root, ".git/refs")))
		}, true},
		{"alternates-out", write(".git/objects/info/alternates", "/OUT\n"), true},
		{"alternates-relative-out", write(".git/objects/info/alternates", "../../../outside\n"), true},
		{"alternates-via-symlink", func(t *testing.T, root, out string) {
			must(t, os.Symlink(out, filepath.Join(root, "ext")))
			write(".git/objects/info/alternates", "../../ext\n")(t, root, out)
		}, true},
		{"alternates-nested-out", func(t *testing.T, root, out string) {
			must(t, os.MkdirAll(filepath.Join(root, "store/info"), 0o755))
			write(".git/objects/info/alternates", "../../store\n")(t, root, out)
			write("store/info/alternates", "/OUT\n")(t, root, out)
		}, true},
		{"packed-refs-in", link("../src/refs", ".git/packed-refs"), false},
		{"alternates-in", func(t *testing.T, root, out string) {
			must(t, os.MkdirAll(filepath.Join(root, "store/info"), 0o755))
			write(".git/objects/info/alternates", "../../store\n")(t, root, out)
		}, false},
		{"dangling-in", link("nowhere", ".git/refs/heads/gone"), false},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			base := t.TempDir()
			root, out := filepath.Join(base, "root"), filepath.Join(base, "outside")
			for _, d := range []string{".git/refs/heads", ".git/objects/info", ".git/info", "src"} {
				must(t, os.MkdirAll(filepath.Join(root, d), 0o755))
			}
			must(t, os.MkdirAll(out, 0o755))
			must(t, os.WriteFile(filepath.Join(out, "secret"), []byte("SECRET\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(root, "src/refs"), []byte("# pack-refs\n"), 0o644))
			r.setup(t, root, out)
			rt, err := hostop.OpenRoot(root)
			must(t, err)
			defer rt.Close()
			err = containGitDir(rt)
			if r.bad {
				if !errors.Is(err, ErrOutside) || !errors.Is(err, hostop.ErrSymlinkEscape) {
					t.Fatalf("containGitDir = %v, want %v", err, ErrOutside)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("the error echoes the outside file: %v", err)
				}
			} else if err != nil {
				t.Fatalf("containGitDir = %v, want nil", err)
			}
		})
	}
}

// link makes name (from the root) a symlink to target; /OUT in target is
// the outside directory.
func link(target, name string) func(t *testing.T, root, out string) {
	return func(t *testing.T, root, out string) {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		_ = os.Remove(p)
		must(t, os.Symlink(strings.ReplaceAll(target, "/OUT", out), p))
	}
}

func write(name, content string) func(t *testing.T, root, out string) {
	return func(t *testing.T, root, out string) {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(strings.ReplaceAll(content, "/OUT", out)), 0o644))
	}
}

func TestSanitize(t *testing.T) {
	const shadow = "/tmp/confine-git-123"
	for _, c := range []struct{ in, want string }{
		{"fatal: unexpected line in /tmp/confine-git-123/packed-refs: root:x:0:0:root:/root:/bin/bash\n",
			"fatal: unexpected line in .git/packed-refs: [content withheld: it may come from outside the root]\n"},
		{"error: object directory /etc/x does not exist; check .git/objects/info/alternates\n",
			"error: object directory [...] does not exist; check .git/objects/info/alternates\n"},
		{"fatal: bad config line 3 in file .git/config\n", "fatal: bad config line 3 in file .git/config\n"},
		{"warning: \x1b[31mred\x07\n", "warning: \\x1b[31mred\\x07\n"},
		{"on branch main", "on branch main"},
		{"", ""},
	} {
		if got := string(sanitize([]byte(c.in), shadow)); got != c.want {
			t.Errorf("sanitize(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
