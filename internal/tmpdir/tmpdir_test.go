//go:build unix

package tmpdir

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCreateAndRemove(t *testing.T) {
	d, err := Create(-1, -1)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Root, d.Home, d.Tmp} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != 0o700 {
			t.Errorf("%s has mode %v, want 0700", p, st.Mode().Perm())
		}
	}
	// What a hostile command might leave: a directory it made unreadable.
	locked := filepath.Join(d.Tmp, "locked")
	if err := os.MkdirAll(filepath.Join(locked, "deep"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(locked, "deep", "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0); err != nil {
		t.Fatal(err)
	}
	d.Remove()
	if _, err := os.Stat(d.Root); !os.IsNotExist(err) {
		t.Fatalf("%s still exists: %v", d.Root, err)
	}
}

// Removed at once after Create: Remove waits for the subdirectories, so
// none is made after the removal.
func TestRemoveRightAfterCreate(t *testing.T) {
	for range 20 {
		d, err := Create(os.Geteuid(), os.Getegid())
		if err != nil {
			t.Fatal(err)
		}
		d.Remove()
		if _, err := os.Stat(d.Root); !os.IsNotExist(err) {
			t.Fatalf("%s still exists: %v", d.Root, err)
		}
	}
}

// A root launcher gives the directories to the command's uid.
func TestOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not applicable: chown to another uid needs root")
	}
	d, err := Create(65534, 65534)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Remove()
	if err := d.Wait(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{d.Root, d.Home, d.Tmp} {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil || st.Uid != 65534 || st.Gid != 65534 {
			t.Errorf("%s: owner %d:%d (%v), want 65534:65534", p, st.Uid, st.Gid, err)
		}
	}
}
