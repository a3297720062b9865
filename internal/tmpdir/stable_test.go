//go:build unix

package tmpdir

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// A stable directory keeps its paths and HOME's contents from run to
// run, empties TMPDIR, is one run's at a time, and replaces a HOME or
// TMPDIR that is not a directory of this uid (a symlink, a file).
func TestStable(t *testing.T) {
	for _, tc := range []struct {
		name string
		// before changes what the previous run left (nil: nothing).
		before func(t *testing.T, d *Dir)
		// homeKept: a file the previous run left in HOME is still there.
		homeKept bool
	}{
		{name: "home kept, tmp emptied", homeKept: true},
		{name: "a home replaced by a symlink is replaced", before: func(t *testing.T, d *Dir) {
			outside := t.TempDir()
			must(t, os.WriteFile(filepath.Join(outside, "kept"), []byte("x"), 0o600))
			must(t, os.RemoveAll(d.Home))
			must(t, os.Symlink(outside, d.Home))
			t.Cleanup(func() {
				if _, err := os.Stat(filepath.Join(outside, "kept")); err != nil {
					t.Errorf("the symlink's target was touched: %v", err)
				}
			})
		}},
		{name: "a tmp replaced by a symlink is replaced, its target untouched", homeKept: true, before: func(t *testing.T, d *Dir) {
			outside := t.TempDir()
			must(t, os.WriteFile(filepath.Join(outside, "kept"), []byte("x"), 0o600))
			must(t, os.Symlink(outside, d.Tmp))
			t.Cleanup(func() {
				if _, err := os.Stat(filepath.Join(outside, "kept")); err != nil {
					t.Errorf("the symlink's target was touched: %v", err)
				}
			})
		}},
		{name: "a home replaced by a file is replaced", before: func(t *testing.T, d *Dir) {
			must(t, os.RemoveAll(d.Home))
			must(t, os.WriteFile(d.Home, []byte("x"), 0o600))
		}},
		{name: "modes opened up are closed again", homeKept: true, before: func(t *testing.T, d *Dir) {
			must(t, os.Chmod(d.Root, 0o755))
			must(t, os.Chmod(d.Home, 0o777))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "private")
			d, err := Stable(root)
			if err != nil {
				t.Fatal(err)
			}
			home, tmp := d.Home, d.Tmp
			must(t, os.WriteFile(filepath.Join(d.Home, "rc"), []byte("x"), 0o600))
			must(t, os.WriteFile(filepath.Join(d.Tmp, "left"), []byte("x"), 0o600))
			if !d.Stable() || d.Removable() != "" || d.Scratch() != d.Tmp || !slices.Equal(d.Grants(), []string{d.Home, d.Tmp}) {
				t.Fatalf("stable: Stable %v, Removable %q, Scratch %q, Grants %v", d.Stable(), d.Removable(), d.Scratch(), d.Grants())
			}
			// One run at a time.
			if _, err := Stable(root); !errors.Is(err, ErrBusy) {
				t.Fatalf("a second Stable while the first holds it: %v, want ErrBusy", err)
			}
			d.Remove()
			if _, err := os.Lstat(tmp); !os.IsNotExist(err) {
				t.Fatalf("tmp after Remove: %v, want it gone", err)
			}
			if tc.before != nil {
				tc.before(t, d)
			}
			e, err := Stable(root)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Remove()
			if e.Home != home || e.Tmp != tmp {
				t.Fatalf("paths changed: %s %s, were %s %s", e.Home, e.Tmp, home, tmp)
			}
			for _, p := range []string{e.Root, e.Home, e.Tmp} {
				st, err := os.Lstat(p)
				if err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
					t.Fatalf("%s: %v, %v; want a directory of mode 0700", p, st, err)
				}
			}
			if ents, _ := os.ReadDir(e.Tmp); len(ents) != 0 {
				t.Fatalf("tmp not emptied: %v", ents)
			}
			_, err = os.Stat(filepath.Join(e.Home, "rc"))
			if kept := err == nil; kept != tc.homeKept {
				t.Fatalf("home's file kept: %v, want %v", kept, tc.homeKept)
			}
		})
	}
}

// A run's own directory is not stable: granted whole, removed whole.
func TestOwnIsNotStable(t *testing.T) {
	d, err := Create(-1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if d.Stable() || d.Removable() != d.Root || d.Scratch() != d.Root || !slices.Equal(d.Grants(), []string{d.Root}) {
		t.Fatalf("own: Stable %v, Removable %q, Scratch %q, Grants %v", d.Stable(), d.Removable(), d.Scratch(), d.Grants())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
