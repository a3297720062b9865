//go:build linux

package hostop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func readAll(t *testing.T, root string, names ...string) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, n))
		if err != nil {
			m[n] = "<" + err.Error() + ">"
		} else {
			m[n] = string(b)
		}
	}
	return m
}

func TestPatchApplies(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.root, "a.txt"), []byte("1\n2\n3\n4\n5\n6\n7\n8\n9\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.root, "gone.txt"), []byte("bye\n"), 0o644))
	diff := `diff --git a/a.txt b/a.txt
--- a/a.txt
+++ b/a.txt
@@ -2,3 +2,3 @@
 2
-3
+three
 4
@@ -8,2 +8,3 @@
 8
 9
+10
diff --git a/new/dir/n.txt b/new/dir/n.txt
new file mode 100644
--- /dev/null
+++ b/new/dir/n.txt
@@ -0,0 +1,2 @@
+hello
+world
\ No newline at end of file
diff --git "a/sp ace\tq.txt" "b/sp ace\tq.txt"
new file mode 100644
--- /dev/null
+++ "b/sp ace\tq.txt"
@@ -0,0 +1 @@
+quoted
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
--- a/gone.txt
+++ /dev/null
@@ -1 +0,0 @@
-bye
`
	res, err := Patch(f.r, []byte(diff), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Files) != 4 || res.Files[0].Action != "modified" || res.Files[1].Action != "created" || res.Files[2].Path != "sp ace\tq.txt" || res.Files[3].Action != "deleted" {
		t.Errorf("result: %+v", res)
	}
	got := readAll(t, f.root, "a.txt", "new/dir/n.txt")
	if got["a.txt"] != "1\n2\nthree\n4\n5\n6\n7\n8\n9\n10\n" || got["new/dir/n.txt"] != "hello\nworld" {
		t.Errorf("content: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(f.root, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt still there: %v", err)
	}
}

// TestPatchRefused: each patch must fail and leave every file as it was.
// The controls: a plain write through the same name reaches outside the
// root (checked in TestEscapes for the same fixture shapes).
func TestPatchRefused(t *testing.T) {
	good := "--- a/sub/inner.txt\n+++ b/sub/inner.txt\n@@ -1 +1 @@\n-inner\n+changed\n"
	rows := []struct {
		name, diff string
		want       error
	}{
		{"dotdot", "--- a/../sibling\n+++ b/../sibling\n@@ -1 +1 @@\n-" + secret + "+PWNED\n", ErrDotDot},
		{"dotdot-create", "--- /dev/null\n+++ b/../planted\n@@ -0,0 +1 @@\n+PWNED\n", ErrDotDot},
		{"absolute", "--- /dev/null\n+++ /tmp/planted\n@@ -0,0 +1 @@\n+PWNED\n", ErrAbsolute},
		{"final-symlink-out", good + "--- a/final-link\n+++ b/final-link\n@@ -1 +1 @@\n-" + secret + "+PWNED\n", ErrSymlink},
		{"final-symlink-in", good + "--- a/inner-link\n+++ b/inner-link\n@@ -1 +1 @@\n-inner\n+PWNED\n", ErrSymlink},
		{"dir-symlink-out", good + "--- a/dir-link/secret\n+++ b/dir-link/secret\n@@ -1 +1 @@\n-" + secret + "+PWNED\n", ErrSymlinkEscape},
		{"dir-symlink-create", good + "--- /dev/null\n+++ b/dir-link/planted\n@@ -0,0 +1 @@\n+PWNED\n", ErrSymlinkEscape},
		{"hardlink", good + "--- a/hardlink\n+++ b/hardlink\n@@ -1 +1 @@\n-" + secret + "+PWNED\n", ErrMultiLinked},
		{"fifo", good + "--- a/fifo\n+++ b/fifo\n@@ -1 +1 @@\n-x\n+y\n", ErrSpecial},
		{"bad-hunk-after-good-file", good + "--- a/sub/other.txt\n+++ b/sub/other.txt\n@@ -1,2 +1,2 @@\n a\n-NOT THERE\n+b\n", ErrPatch},
		{"create-in-new-dir-then-bad-hunk", "--- /dev/null\n+++ b/newdir/deep/x.txt\n@@ -0,0 +1 @@\n+x\n" + good + "--- a/sub/other.txt\n+++ b/sub/other.txt\n@@ -1 +1 @@\n-NOT THERE\n+b\n", ErrPatch},
		{"create-existing", good + "--- /dev/null\n+++ b/sub/other.txt\n@@ -0,0 +1 @@\n+x\n", ErrPatch},
		{"rename", "diff --git a/x b/y\nrename from x\nrename to y\n", ErrPatch},
		{"garbage", "hello\n", ErrPatch},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t)
			must(t, os.WriteFile(filepath.Join(f.root, "sub", "other.txt"), []byte("a\nb\n"), 0o644))
			names := []string{"sub/inner.txt", "sub/other.txt", "hardlink"}
			before := readAll(t, f.root, names...)
			_, err := Patch(f.r, []byte(r.diff), 0)
			if !errors.Is(err, r.want) {
				t.Fatalf("Patch = %v, want %v", err, r.want)
			}
			if !errors.Is(err, ErrPatch) { // every refusal is also one
				t.Errorf("Patch = %v, not an ErrPatch", err)
			}
			after := readAll(t, f.root, names...)
			for _, n := range names {
				if before[n] != after[n] {
					t.Errorf("%s changed: %q -> %q", n, before[n], after[n])
				}
			}
			ents, _ := os.ReadDir(filepath.Join(f.root, "sub"))
			if len(ents) != 2 {
				t.Errorf("sub holds %d entries (temporary files left?)", len(ents))
			}
			if _, err := os.Lstat(filepath.Join(f.root, "newdir")); !os.IsNotExist(err) {
				t.Errorf("a directory the failed patch created remains: %v", err)
			}
			f.outsideIntact(t)
		})
	}
}
