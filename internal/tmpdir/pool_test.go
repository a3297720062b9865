//go:build unix

package tmpdir

import (
	"os"
	"path/filepath"
	"testing"
)

// filled refills k and waits for the pool to hold Size ready directories.
func filled(t *testing.T, p *Pool, parent string, uid, gid int) []*Dir {
	t.Helper()
	p.Refill(parent, uid, gid)
	p.wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	ds := append([]*Dir(nil), p.ready[poolKey{parent, uid, gid}]...)
	if len(ds) != p.size() {
		t.Fatalf("pool holds %d ready directories, want %d", len(ds), p.size())
	}
	return ds
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// A pooled directory is handed out once, as CreateIn makes it; one that
// changed since it was made is removed and never handed out.
func TestPoolTake(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, d *Dir)
		pooled bool // Take hands out the pooled directory
	}{
		{"untouched", func(*testing.T, *Dir) {}, true},
		{"a file planted in home", func(t *testing.T, d *Dir) {
			if err := os.WriteFile(filepath.Join(d.Home, ".bashrc"), []byte("evil"), 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"a file planted in tmp", func(t *testing.T, d *Dir) {
			if err := os.Mkdir(filepath.Join(d.Tmp, "x"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"an entry beside home and tmp", func(t *testing.T, d *Dir) {
			if err := os.WriteFile(filepath.Join(d.Root, "extra"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"home made a symlink", func(t *testing.T, d *Dir) {
			if err := os.Remove(d.Home); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(t.TempDir(), d.Home); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"root's mode widened", func(t *testing.T, d *Dir) {
			if err := os.Chmod(d.Root, 0o755); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"root removed", func(t *testing.T, d *Dir) {
			if err := os.RemoveAll(d.Root); err != nil {
				t.Fatal(err)
			}
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			p := &Pool{Size: 1}
			defer p.Close()
			ready := filled(t, p, parent, -1, -1)[0]
			tc.tamper(t, ready)
			d, err := p.Take(parent, -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer d.Remove()
			if err := d.Wait(); err != nil {
				t.Fatal(err)
			}
			if got := d.Root == ready.Root; got != tc.pooled {
				t.Fatalf("took %s, the pooled one is %s: pooled %v, want %v", d.Root, ready.Root, got, tc.pooled)
			}
			if !tc.pooled && exists(ready.Root) {
				t.Errorf("the changed pooled directory %s is still there", ready.Root)
			}
			if !d.valid(poolKey{parent, -1, -1}) {
				t.Errorf("took %s, which is not an empty private directory of mode 0700", d.Root)
			}
			// Handed out once: the next is another.
			d2, err := p.Take(parent, -1, -1)
			if err != nil {
				t.Fatal(err)
			}
			defer d2.Remove()
			if d2.Root == d.Root {
				t.Fatalf("%s handed out twice", d.Root)
			}
		})
	}
}

// A parent that resolves elsewhere since the directory was made (a
// re-pointed TMPDIR symlink) gets a directory in its new place.
func TestPoolParentMoved(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(base, "tmp")
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	p := &Pool{Size: 1}
	defer p.Close()
	old := filled(t, p, link, -1, -1)[0]
	if filepath.Dir(old.Root) != a {
		t.Fatalf("pooled %s, not in %s", old.Root, a)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b, link); err != nil {
		t.Fatal(err)
	}
	d, err := p.Take(link, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if filepath.Dir(d.Root) != b || exists(old.Root) {
		t.Fatalf("took %s (want one in %s); the old one %s exists: %v", d.Root, b, old.Root, exists(old.Root))
	}
}

// Keys beyond Keys lose their directories, and Close removes the rest.
func TestPoolEvictAndClose(t *testing.T) {
	p := &Pool{Size: 1, Keys: 1}
	first, second := t.TempDir(), t.TempDir()
	d, err := p.Take(first, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	d.Remove()
	old := filled(t, p, first, -1, -1)[0]
	d, err = p.Take(second, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	d.Remove()
	kept := filled(t, p, second, -1, -1)[0]
	if exists(old.Root) {
		t.Errorf("%s of the evicted key is still there", old.Root)
	}
	p.Close()
	if exists(kept.Root) {
		t.Errorf("%s is still there after Close", kept.Root)
	}
	// Closed: Take still works, and pools nothing.
	d, err = p.Take(second, -1, -1)
	if err != nil {
		t.Fatal(err)
	}
	d.Remove()
	p.Refill(second, -1, -1)
	p.wg.Wait()
	if n := len(p.ready[poolKey{second, -1, -1}]); n != 0 {
		t.Errorf("a closed pool made %d directories", n)
	}
}

// Directories are made for, and handed to, one owner: a root launcher's
// pool for uid 65534 never hands out one of its own, nor the reverse.
func TestPoolOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not applicable: directories of another uid need root")
	}
	parent := t.TempDir()
	p := &Pool{Size: 1}
	defer p.Close()
	nobody := filled(t, p, parent, 65534, 65534)[0]
	mine := filled(t, p, parent, -1, -1)[0]
	for _, tc := range []struct {
		uid, gid int
		want     *Dir
	}{{65534, 65534, nobody}, {-1, -1, mine}} {
		d, err := p.Take(parent, tc.uid, tc.gid)
		if err != nil {
			t.Fatal(err)
		}
		defer d.Remove()
		if d.Root != tc.want.Root {
			t.Errorf("uid %d took %s, want its own pooled %s", tc.uid, d.Root, tc.want.Root)
		}
	}
	// A directory given to another owner since it was made is refused.
	again := filled(t, p, parent, 65534, 65534)[0]
	if err := os.Chown(again.Home, 0, 0); err != nil {
		t.Fatal(err)
	}
	d, err := p.Take(parent, 65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if d.Root == again.Root || exists(again.Root) {
		t.Errorf("took %s; the re-owned pooled %s exists: %v", d.Root, again.Root, exists(again.Root))
	}
}
