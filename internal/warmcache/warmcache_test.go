//go:build linux

package warmcache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/policy"
)

func TestCacheDirs(t *testing.T) {
	base := t.TempDir()
	t.Setenv(RootEnv, base)
	goProf := policy.Profile{Name: "go", Caches: []string{"GOCACHE=go-build"}}
	pyProf := policy.Profile{Name: "python", Caches: []string{"PIP_CACHE_DIR=pip"}}
	one := func(p policy.Profile, wt string) string {
		t.Helper()
		c, err := Dirs(os.LookupEnv, p, wt, -1)
		if err != nil || len(c) != 1 {
			t.Fatalf("Dirs(os.LookupEnv, %s, %s) = %v, %v", p.Name, wt, c, err)
		}
		_, dir, _ := strings.Cut(c[0], "=")
		if st, err := os.Lstat(dir); err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v %v", dir, st, err)
		}
		return c[0]
	}
	a := one(goProf, "/w/a")
	if again := one(goProf, "/w/a"); again != a {
		t.Errorf("the same profile and work directory got %s, then %s", a, again)
	}
	// One per work directory and per profile.
	if b := one(goProf, "/w/b"); b == a {
		t.Errorf("two work directories share %s", a)
	}
	if p := one(pyProf, "/w/a"); strings.TrimPrefix(p, "PIP_CACHE_DIR=") == strings.TrimPrefix(a, "GOCACHE=") || !strings.HasPrefix(p, "PIP_CACHE_DIR=") {
		t.Errorf("go and python caches: %s, %s", a, p)
	}
	if c, err := Dirs(os.LookupEnv, policy.Profile{Name: "default"}, "/w/a", -1); c != nil || err != nil {
		t.Errorf("a profile without caches got %v, %v", c, err)
	}

	// A cache directory a run replaced by a symlink (it cannot: its
	// parent is not granted, but the launcher checks all the same) is
	// never followed into a grant.
	_, dir, _ := strings.Cut(a, "=")
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), dir); err != nil {
		t.Fatal(err)
	}
	if c, err := Dirs(os.LookupEnv, goProf, "/w/a", -1); !errors.Is(err, ErrNoCache) {
		t.Errorf("symlinked cache: %v, %v; want ErrNoCache", c, err)
	}
	for _, bad := range []string{"GOCACHE", "GOCACHE=", "=x", "GOCACHE=a/b", "GOCACHE=.."} {
		if c, err := Dirs(os.LookupEnv, policy.Profile{Name: "bad", Caches: []string{bad}}, "/w/a", -1); !errors.Is(err, ErrNoCache) {
			t.Errorf("entry %q: %v, %v; want ErrNoCache", bad, c, err)
		}
	}
	// Another uid cannot reach the launcher's cache directory.
	if c, err := Dirs(os.LookupEnv, goProf, "/w/a", os.Geteuid()+1); !errors.Is(err, ErrNoCache) {
		t.Errorf("command as another uid: %v, %v; want ErrNoCache", c, err)
	}
}

// A seeded cache is made once, before any run reaches it: the cargo home
// links the caller's shared parts, the npm copy holds files of its own
// and nothing that leads back into the caller's cache.
func TestCacheSeeds(t *testing.T) {
	base := t.TempDir()
	t.Setenv(RootEnv, base)
	caller := t.TempDir()
	for name, body := range map[string]string{"_cacache/index-v5/aa/entry": "index", "_cacache/content-v2/bb": "content"} {
		p := filepath.Join(caller, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc", filepath.Join(caller, "_cacache", "link")); err != nil {
		t.Fatal(err)
	}
	node := policy.Profile{Name: "node", Caches: []string{"npm_config_cache=npm"},
		Env: policy.EnvPolicy{Set: []string{"npm_config_cache=" + caller}}}
	c, err := Dirs(os.LookupEnv, node, "/w/a", -1)
	if err != nil || len(c) != 1 {
		t.Fatalf("Dirs: %v, %v", c, err)
	}
	own := strings.TrimPrefix(c[0], "npm_config_cache=")
	for _, rel := range []string{"_cacache/index-v5/aa/entry", "_cacache/content-v2/bb"} {
		var a, b unix.Stat_t
		if err := unix.Lstat(filepath.Join(caller, rel), &a); err != nil {
			t.Fatal(err)
		}
		if err := unix.Lstat(filepath.Join(own, rel), &b); err != nil {
			t.Fatalf("%s not copied: %v", rel, err)
		}
		if a.Ino == b.Ino || b.Mode&unix.S_IFMT != unix.S_IFREG || b.Nlink != 1 {
			t.Errorf("%s: the copy is not a file of its own (inode %d vs %d, links %d)", rel, b.Ino, a.Ino, b.Nlink)
		}
	}
	if _, err := os.Lstat(filepath.Join(own, "_cacache", "link")); !os.IsNotExist(err) {
		t.Errorf("a symlink in the caller's cache was copied: %v", err)
	}
	// Made once: a later run's cache is what the earlier runs left, not a
	// fresh copy.
	if err := os.Remove(filepath.Join(own, "_cacache", "content-v2", "bb")); err != nil {
		t.Fatal(err)
	}
	if _, err := Dirs(os.LookupEnv, node, "/w/a", -1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(own, "_cacache", "content-v2", "bb")); !os.IsNotExist(err) {
		t.Errorf("the cache was seeded again: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(own), ".new-*")); len(m) != 0 {
		t.Errorf("seeding left %v", m)
	}

	rust := policy.Profile{Name: "rust", Caches: []string{"CARGO_HOME=cargo-home"},
		Env: policy.EnvPolicy{Set: []string{"CARGO_HOME=" + caller}}}
	if c, err = Dirs(os.LookupEnv, rust, "/w/a", -1); err != nil || len(c) != 1 {
		t.Fatalf("Dirs: %v, %v", c, err)
	}
	home := strings.TrimPrefix(c[0], "CARGO_HOME=")
	for _, rel := range cargoShared {
		if l, err := os.Readlink(filepath.Join(home, rel)); err != nil || l != filepath.Join(caller, rel) {
			t.Errorf("%s: %q, %v; want a link to the caller's", rel, l, err)
		}
	}
	for _, rel := range []string{"registry/src", "git/checkouts"} {
		if _, err := os.Lstat(filepath.Join(home, rel)); !os.IsNotExist(err) {
			t.Errorf("%s is not left to cargo to make in the run's home: %v", rel, err)
		}
	}
	// Without a caller's home to read through, an empty one.
	if c, err = Dirs(os.LookupEnv, policy.Profile{Name: "rust", Caches: []string{"CARGO_HOME=cargo-home"}}, "/w/b", -1); err != nil || len(c) != 1 {
		t.Fatalf("Dirs: %v, %v", c, err)
	}
	if ents, err := os.ReadDir(strings.TrimPrefix(c[0], "CARGO_HOME=")); err != nil || len(ents) != 0 {
		t.Errorf("unseeded cargo home: %v, %v", ents, err)
	}
}
