package tmpdir

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCreateAndRemove(t *testing.T) {
	d, err := Create(-1, -1)
	if err != nil {
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
	Remove(d.Root)
	if _, err := os.Stat(d.Root); !os.IsNotExist(err) {
		t.Fatalf("%s still exists: %v", d.Root, err)
	}
}
