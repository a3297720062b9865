//go:build linux

package confine

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/policy"
)

func TestCacheDirs(t *testing.T) {
	base := t.TempDir()
	t.Setenv(cacheRootEnv, base)
	goProf := policy.Profile{Name: "go", Caches: []string{"GOCACHE=go-build"}}
	pyProf := policy.Profile{Name: "python", Caches: []string{"PIP_CACHE_DIR=pip"}}
	one := func(p policy.Profile, wt string) string {
		t.Helper()
		c, err := cacheDirs(p, wt, -1)
		if err != nil || len(c) != 1 {
			t.Fatalf("cacheDirs(%s, %s) = %v, %v", p.Name, wt, c, err)
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
	if c, err := cacheDirs(policy.Profile{Name: "default"}, "/w/a", -1); c != nil || err != nil {
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
	if c, err := cacheDirs(goProf, "/w/a", -1); !errors.Is(err, errNoCache) {
		t.Errorf("symlinked cache: %v, %v; want errNoCache", c, err)
	}
	for _, bad := range []string{"GOCACHE", "GOCACHE=", "=x", "GOCACHE=a/b", "GOCACHE=.."} {
		if c, err := cacheDirs(policy.Profile{Name: "bad", Caches: []string{bad}}, "/w/a", -1); !errors.Is(err, errNoCache) {
			t.Errorf("entry %q: %v, %v; want errNoCache", bad, c, err)
		}
	}
	// Another uid cannot reach the launcher's cache directory.
	if c, err := cacheDirs(goProf, "/w/a", os.Geteuid()+1); !errors.Is(err, errNoCache) {
		t.Errorf("command as another uid: %v, %v; want errNoCache", c, err)
	}
}
