//go:build linux

package landlock

import (
	"fmt"
	"os"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
)

// TestGuarded: a read-write root holding a guarded .git is granted around
// it. .git cannot be written, replaced or removed; the other entries keep
// every right; the root's own entries are fixed; a symlink entry leading
// outside gains nothing. Each probe also runs unconfined (the control),
// where it succeeds. As root and as an unprivileged uid.
func TestGuarded(t *testing.T) {
	abi := requireLandlock(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to switch to an unprivileged uid")
	}
	s := newSandbox(t)
	for _, uid := range []int{0, nobody} {
		for _, mode := range []string{"control", "confined"} {
			t.Run(fmt.Sprintf("uid%d/%s", uid, mode), func(t *testing.T) {
				f := newFixture(t, s, uid)
				git := f.rw + "/.git"
				for _, d := range []string{git + "/hooks", f.rw + "/a/deep"} {
					if err := os.MkdirAll(d, 0o755); err != nil {
						t.Fatal(err)
					}
				}
				if err := os.WriteFile(git+"/config", []byte("[core]\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(f.out+"/secret", f.rw+"/outlink"); err != nil {
					t.Fatal(err)
				}
				for _, p := range []string{git, git + "/hooks", git + "/config", f.rw + "/a/deep", f.rw + "/outlink"} {
					if err := os.Lchown(p, uid, uid); err != nil {
						t.Fatal(err)
					}
				}
				pol := f.policy()
				guarded := []string{git}
				ops := []struct {
					op   op
					conf string // confined outcome; the control must give "ok"
				}{
					{op{Name: "write .git/config", Kind: "write", Path: git + "/config"}, "EACCES"},
					{op{Name: "create a hook", Kind: "create", Path: git + "/hooks/pre-commit"}, "EACCES"},
					{op{Name: "truncate .git/config", Kind: "truncate", Path: git + "/config"}, "*"},
					{op{Name: "link .git/config out", Kind: "link", Path: git + "/config", Path2: f.rw + "/a/cfg"}, "EXDEV"},
					{op{Name: "write a/x", Kind: "write", Path: f.rw + "/a/x"}, "ok"},
					{op{Name: "create a/new", Kind: "create", Path: f.rw + "/a/new"}, "ok"},
					{op{Name: "mkdir a/deep/d", Kind: "mkdir", Path: f.rw + "/a/deep/d"}, "ok"},
					{op{Name: "rename a/x to b/x", Kind: "rename", Path: f.rw + "/a/x", Path2: f.rw + "/b/x"}, "*"},
					{op{Name: "write top-level file", Kind: "write", Path: f.rw + "/file"}, "ok"},
					{op{Name: "create top-level entry", Kind: "create", Path: f.rw + "/newtop"}, "EACCES"},
					{op{Name: "unlink top-level file", Kind: "unlink", Path: f.rw + "/file2"}, "EACCES"},
					{op{Name: "write through top-level symlink", Kind: "write", Path: f.rw + "/outlink"}, "EACCES"},
					{op{Name: "read .git/config", Kind: "read", Path: git + "/config"}, "ok"},
					// Last: the control really moves it.
					{op{Name: "rename .git away", Kind: "rename", Path: git, Path2: f.rw + "/moved"}, "EACCES"},
				}
				spec := childSpec{Mode: mode, Policy: pol, Guarded: guarded}
				for _, o := range ops {
					spec.Ops = append(spec.Ops, o.op)
				}
				res, out, code := s.run(t, uid, f.rw, spec)
				if code != 0 {
					t.Fatalf("child exited %d: %s", code, out)
				}
				for _, o := range ops {
					want := "ok"
					if mode == "confined" {
						want = o.conf
					}
					got := res[o.op.Name]
					switch {
					case want == "*":
						// truncate(2) is Landlock's from ABI 3 only; rename
						// across directories needs REFER (ABI 2).
						t.Logf("%s: %s (ABI %d)", o.op.Name, got, abi)
					case got != want:
						t.Errorf("%s: got %s, want %s", o.op.Name, got, want)
					}
				}
			})
		}
	}
}

// BenchmarkPrepareGuarded is what the guard adds to a core run's ruleset
// in a work tree of 100 top-level directories (the bench's 10,000-file
// tree): one rule per entry. Compare with /plain.
func BenchmarkPrepareGuarded(b *testing.B) {
	if abi, _, err := ABI(); err != nil || abi < 1 {
		b.Skipf("no Landlock on this host (%v)", err)
	}
	w := b.TempDir()
	for i := 0; i < 100; i++ {
		if err := os.MkdirAll(fmt.Sprintf("%s/d%03d", w, i), 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.Mkdir(w+"/.git", 0o755); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		guarded []string
	}{{"plain", nil}, {"guarded", []string{w + "/.git"}}} {
		b.Run(bc.name, func(b *testing.B) {
			p := plan.Landlock{ReadExec: DefaultSystemReadExec(), Optional: DefaultSystemReadExec(), ReadWrite: []string{w}}
			for b.Loop() {
				r, err := Prepare(p, bc.guarded, nil)
				if err != nil {
					b.Fatal(err)
				}
				r.Close()
			}
		})
	}
}
