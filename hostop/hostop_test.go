//go:build linux

package hostop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// asUserEnv makes the test binary run one test as the uid it was
// re-executed as (TestAsUsers).
const asUserEnv = "CONFINE_HOSTOP_AS_USER"

const secret = "SECRET-OUTSIDE-THE-ROOT\n"

// fixture is a root directory and a sibling "outside" directory holding
// secret files, with the usual attack shapes inside the root.
type fixture struct {
	base, root, outside string
	r                   *Root
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	base := t.TempDir()
	f := &fixture{base: base, root: filepath.Join(base, "root"), outside: filepath.Join(base, "outside")}
	must(t, os.MkdirAll(filepath.Join(f.root, "sub"), 0o755))
	must(t, os.MkdirAll(f.outside, 0o755))
	must(t, os.WriteFile(filepath.Join(f.outside, "secret"), []byte(secret), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "sibling"), []byte(secret), 0o644))
	must(t, os.WriteFile(filepath.Join(f.root, "sub", "inner.txt"), []byte("inner\n"), 0o644))
	must(t, os.Symlink(filepath.Join(f.outside, "secret"), filepath.Join(f.root, "final-link")))
	must(t, os.Symlink("../outside/secret", filepath.Join(f.root, "rel-final-link")))
	must(t, os.Symlink(f.outside, filepath.Join(f.root, "dir-link")))
	must(t, os.Symlink("sub", filepath.Join(f.root, "inner-dir-link")))
	must(t, os.Symlink("sub/inner.txt", filepath.Join(f.root, "inner-link")))
	must(t, os.Link(filepath.Join(f.outside, "secret"), filepath.Join(f.root, "hardlink")))
	must(t, unix.Mkfifo(filepath.Join(f.root, "fifo"), 0o644))
	r, err := OpenRoot(f.root)
	must(t, err)
	t.Cleanup(func() { r.Close() })
	f.r = r
	return f
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) outsideIntact(t *testing.T) {
	t.Helper()
	for _, p := range []string{filepath.Join(f.outside, "secret"), filepath.Join(f.base, "sibling")} {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != secret {
			t.Fatalf("%s changed: %q %v", p, b, err)
		}
	}
	if ents, _ := os.ReadDir(f.outside); len(ents) != 1 {
		t.Fatalf("outside dir gained entries: %v", ents)
	}
}

// TestEscapes attacks Read and Write with every path shape. Each row has an
// unconfined control that must reach the outside file through the same
// path, so the row proves the confinement and not a broken fixture.
func TestEscapes(t *testing.T) {
	type row struct {
		name    string
		path    string
		write   bool
		want    error
		control func(f *fixture) bool // the attack succeeds unconfined
	}
	readsSecret := func(p string) func(f *fixture) bool {
		return func(f *fixture) bool {
			// Not filepath.Join: it would clean "x/../y" lexically, and
			// the attack is the kernel's resolution of it.
			b, err := os.ReadFile(f.root + "/" + p)
			return err == nil && string(b) == secret
		}
	}
	writesOutside := func(p string) func(f *fixture) bool {
		return func(f *fixture) bool {
			// Probe with an O_APPEND of nothing: opening for write
			// through the path is the attack; the content is restored.
			fd, err := os.OpenFile(filepath.Join(f.root, p), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return false
			}
			fd.Close()
			var a, b unix.Stat_t
			return unix.Stat(filepath.Join(f.root, p), &a) == nil && unix.Stat(filepath.Join(f.outside, "secret"), &b) == nil && a.Ino == b.Ino
		}
	}
	createsOutside := func(dir string) func(f *fixture) bool {
		return func(f *fixture) bool {
			p := filepath.Join(f.root, dir, "planted")
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				return false
			}
			_, err := os.Stat(filepath.Join(f.outside, "planted"))
			_ = os.Remove(p)
			return err == nil
		}
	}
	rows := []row{
		{"absolute", "/etc/passwd", false, ErrAbsolute, func(*fixture) bool { _, err := os.ReadFile("/etc/passwd"); return err == nil }},
		{"dotdot", "../sibling", false, ErrDotDot, readsSecret("../sibling")},
		{"dotdot-write", "../sibling", true, ErrDotDot, func(f *fixture) bool { return readsSecret("../sibling")(f) }},
		{"dotdot-through-symlinked-dir", "dir-link/../sibling", false, ErrDotDot, readsSecret("dir-link/../sibling")},
		{"final-symlink-abs", "final-link", false, ErrSymlinkEscape, readsSecret("final-link")},
		{"final-symlink-rel", "rel-final-link", false, ErrSymlinkEscape, readsSecret("rel-final-link")},
		{"intermediate-symlink", "dir-link/secret", false, ErrSymlinkEscape, readsSecret("dir-link/secret")},
		{"write-final-symlink", "final-link", true, ErrSymlink, writesOutside("final-link")},
		{"write-intermediate-symlink-out", "dir-link/planted", true, ErrSymlinkEscape, createsOutside("dir-link")},
		{"hardlink-read", "hardlink", false, ErrMultiLinked, readsSecret("hardlink")},
		{"hardlink-write", "hardlink", true, ErrMultiLinked, writesOutside("hardlink")},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			f := newFixture(t)
			if !r.control(f) {
				t.Fatalf("control: the unconfined attack through %q did not reach outside the root; the row proves nothing", r.path)
			}
			if r.write {
				p, err := f.r.WritePath(r.path)
				if err == nil {
					_, err = Write(p, []byte("PWNED\n"), WriteOptions{})
				}
				if !errors.Is(err, r.want) {
					t.Fatalf("Write(%q) = %v, want %v", r.path, err, r.want)
				}
			} else {
				p, err := f.r.ReadPath(r.path)
				var res ReadResult
				if err == nil {
					res, err = Read(p, 0)
				}
				if !errors.Is(err, r.want) {
					t.Fatalf("Read(%q) = %v (content %q), want %v", r.path, err, res.Content.Head, r.want)
				}
			}
			f.outsideIntact(t)
		})
	}
}

// TestNotFollowedInside: symlinks inside the root are read through, never
// written through.
func TestSymlinksInsideRoot(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{"inner-link", "inner-dir-link/inner.txt"} {
		rp, _ := f.r.ReadPath(p)
		res, err := Read(rp, 0)
		if err != nil || string(res.Content.Head) != "inner\n" {
			t.Errorf("Read(%q) = %q, %v; want inner", p, res.Content.Head, err)
		}
		wp, _ := f.r.WritePath(p)
		if _, err := Write(wp, []byte("x"), WriteOptions{}); !errors.Is(err, ErrSymlink) {
			t.Errorf("Write(%q) = %v, want ErrSymlink", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(f.root, "sub", "inner.txt")); string(b) != "inner\n" {
		t.Fatalf("inner.txt changed: %q", b)
	}
}

func TestSpecialFiles(t *testing.T) {
	f := newFixture(t)
	type row struct{ name, path string }
	rows := []row{{"fifo", "fifo"}, {"directory", "sub"}}
	if os.Geteuid() == 0 {
		err := unix.Mknod(filepath.Join(f.root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
		if err != nil {
			t.Logf("device row not run: mknod as root failed here: %v", err)
		} else {
			rows = append(rows, row{"char-device", "null"})
		}
	} else {
		t.Logf("device row not run: creating a device node needs root (uid %d)", os.Geteuid())
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			rp, _ := f.r.ReadPath(r.path)
			if _, err := Read(rp, 0); !errors.Is(err, ErrSpecial) {
				t.Errorf("Read = %v, want ErrSpecial", err)
			}
			wp, _ := f.r.WritePath(r.path)
			if _, err := Write(wp, []byte("x"), WriteOptions{}); !errors.Is(err, ErrSpecial) {
				t.Errorf("Write = %v, want ErrSpecial", err)
			}
			var st unix.Stat_t
			must(t, unix.Lstat(filepath.Join(f.root, r.path), &st))
			if st.Mode&unix.S_IFMT == unix.S_IFREG {
				t.Fatal("replaced by a regular file")
			}
		})
	}
}

// TestSwapDuringOperation swaps a directory of the root for a symlink to
// the outside while reads and writes go through it. The control does the
// same with plain path calls and must reach the outside at least once.
func TestSwapDuringOperation(t *testing.T) {
	f := newFixture(t)
	must(t, os.WriteFile(filepath.Join(f.root, "sub", "secret"), []byte("inside\n"), 0o644))
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		sub, tmp, link := filepath.Join(f.root, "sub"), filepath.Join(f.root, "sub.real"), filepath.Join(f.root, "sub.link")
		for {
			select {
			case <-stop:
				_ = os.Rename(tmp, sub)
				return
			default:
			}
			// sub <-> symlink to outside, swapped with renames.
			_ = os.Symlink(f.outside, link)
			_ = os.Rename(sub, tmp)
			_ = os.Rename(link, sub)
			_ = os.Rename(sub, link)
			_ = os.Rename(tmp, sub)
			_ = os.Remove(link)
		}
	}()
	var control, tries int
	for ; tries < 200000 && control == 0; tries++ {
		if b, err := os.ReadFile(filepath.Join(f.root, "sub", "secret")); err == nil && string(b) == secret {
			control++
		}
	}
	if control == 0 {
		close(stop)
		<-done
		t.Fatal("control: 200000 unconfined reads never went through the swapped symlink; the row proves nothing")
	}
	t.Logf("control: an unconfined read went through the swapped symlink after %d tries", tries)
	var leaked atomic.Int32
	rp, _ := f.r.ReadPath("sub/secret")
	wp, _ := f.r.WritePath("sub/secret")
	for i := range 3000 {
		if res, err := Read(rp, 0); err == nil && strings.Contains(string(res.Content.Head), "SECRET") {
			leaked.Add(1)
		}
		if i%10 == 0 { // each write syncs: fewer of them
			_, _ = Write(wp, []byte("inside\n"), WriteOptions{})
		}
	}
	close(stop)
	<-done
	if leaked.Load() != 0 {
		t.Fatalf("%d confined reads returned the outside file", leaked.Load())
	}
	f.outsideIntact(t)
}

func TestWriteAtomicAndBounded(t *testing.T) {
	f := newFixture(t)
	wp, _ := f.r.WritePath("new/dir/file.txt")
	res, err := Write(wp, []byte("hello\n"), WriteOptions{})
	if err != nil || !res.Created {
		t.Fatalf("Write = %+v, %v", res, err)
	}
	must(t, os.Chmod(filepath.Join(f.root, "new/dir/file.txt"), 0o755))
	if _, err := Write(wp, []byte("again\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(filepath.Join(f.root, "new/dir/file.txt"))
	if st.Mode().Perm() != 0o755 {
		t.Errorf("mode not kept: %v", st.Mode())
	}
	if _, err := Write(wp, make([]byte, 11), WriteOptions{Limit: 10}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the limit: %v", err)
	}
	if _, err := Write(wp, []byte("x"), WriteOptions{NoReplace: true}); !errors.Is(err, os.ErrExist) {
		t.Errorf("NoReplace: %v", err)
	}
	ents, _ := os.ReadDir(filepath.Join(f.root, "new/dir"))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if _, err := f.r.WritePath("."); !errors.Is(err, ErrInvalidPath) {
		t.Errorf("WritePath(.) = %v", err)
	}
}

// TestWriteKeepsOwner: a root caller working on a user's tree leaves the
// files that user's, replaced and new ones alike.
func TestWriteKeepsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only a root caller can leave files owned by another uid")
	}
	f := newFixture(t)
	const uid = testutil.NobodyUID
	must(t, os.Chown(filepath.Join(f.root, "sub"), uid, uid))
	must(t, os.Chown(filepath.Join(f.root, "sub", "inner.txt"), uid, uid))
	for _, p := range []string{"sub/inner.txt", "sub/new.txt"} {
		wp, _ := f.r.WritePath(p)
		if _, err := Write(wp, []byte("x\n"), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		must(t, unix.Lstat(filepath.Join(f.root, p), &st))
		if st.Uid != uid || st.Gid != uid {
			t.Errorf("%s: owned by %d:%d, want %d", p, st.Uid, st.Gid, uid)
		}
	}
	if _, err := Patch(f.r, []byte("--- a/sub/inner.txt\n+++ b/sub/inner.txt\n@@ -1 +1 @@\n-x\n+y\n"), 0); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	must(t, unix.Lstat(filepath.Join(f.root, "sub/inner.txt"), &st))
	if st.Uid != uid {
		t.Errorf("patched file owned by %d, want %d", st.Uid, uid)
	}
}

func TestReadHeadTail(t *testing.T) {
	f := newFixture(t)
	data := bytes.Repeat([]byte("0123456789"), 100)
	must(t, os.WriteFile(filepath.Join(f.root, "big"), data, 0o644))
	rp, _ := f.r.ReadPath("big")
	res, err := Read(rp, 100)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Content
	if !c.Truncated || c.Total != 1000 || !bytes.Equal(c.Head, data[:50]) || !bytes.Equal(c.Tail, data[950:]) {
		t.Fatalf("head/tail wrong: %+v", c)
	}
}

func TestList(t *testing.T) {
	f := newFixture(t)
	rp, _ := f.r.ReadPath(".")
	res, err := List(rp, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range res.Entries {
		got[e.Name] = e.Type
	}
	for n, ty := range map[string]string{"sub": "dir", "final-link": "symlink", "fifo": "fifo", "hardlink": "file"} {
		if got[n] != ty {
			t.Errorf("%s: %q, want %q", n, got[n], ty)
		}
	}
	rp, _ = f.r.ReadPath("dir-link")
	if _, err := List(rp, 0); !errors.Is(err, ErrSymlinkEscape) {
		t.Errorf("List(dir-link) = %v, want ErrSymlinkEscape", err)
	}
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	must(t, os.MkdirAll(filepath.Join(f.root, ".git"), 0o755))
	must(t, os.WriteFile(filepath.Join(f.root, ".git", "config"), []byte("needle in git\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.root, "a.txt"), []byte("one\nneedle two\nthree\nneedle four\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.root, "bin"), []byte("needle\x00binary"), 0o644))
	must(t, os.WriteFile(filepath.Join(f.outside, "x"), []byte("needle outside\n"), 0o644))
	rp, _ := f.r.ReadPath(".")
	res, err := Search(context.Background(), rp, regexp.MustCompile("needle"), SearchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Match{{"a.txt", 2, "needle two"}, {"a.txt", 4, "needle four"}}
	if len(res.Matches) != len(want) {
		t.Fatalf("matches %+v, want %+v", res.Matches, want)
	}
	for i := range want {
		if res.Matches[i] != want[i] {
			t.Errorf("match %d: %+v, want %+v", i, res.Matches[i], want[i])
		}
	}
	if res.Binary != 1 || res.Linked != 1 || res.Special != 1 {
		t.Errorf("skips: %+v", res)
	}
	res, _ = Search(context.Background(), rp, regexp.MustCompile("needle"), SearchOptions{MaxMatches: 1})
	if len(res.Matches) != 1 || !res.Truncated {
		t.Errorf("MaxMatches: %+v", res)
	}
}

func TestSearchOrderAndBounds(t *testing.T) {
	f := newFixture(t)
	for i := range 50 {
		must(t, os.WriteFile(filepath.Join(f.root, "sub", fmt.Sprintf("f%02d", i)), []byte("x\nhit\n"), 0o644))
	}
	rp, _ := f.r.ReadPath("sub")
	all, err := Search(context.Background(), rp, regexp.MustCompile("hit"), SearchOptions{})
	must(t, err)
	if len(all.Matches) != 50 || all.Files != 51 || all.Truncated {
		t.Fatalf("%d matches in %d files (truncated %v)", len(all.Matches), all.Files, all.Truncated)
	}
	for i, m := range all.Matches {
		if want := fmt.Sprintf("sub/f%02d", i); m.Path != want || m.Line != 2 {
			t.Fatalf("match %d: %+v, want %s:2", i, m, want)
		}
	}
	some, _ := Search(context.Background(), rp, regexp.MustCompile("hit"), SearchOptions{MaxMatches: 10})
	if len(some.Matches) != 10 || some.Matches[9].Path != "sub/f09" || !some.Truncated {
		t.Fatalf("MaxMatches 10: %+v", some)
	}
	files, _ := Search(context.Background(), rp, regexp.MustCompile("hit"), SearchOptions{MaxFiles: 5})
	if files.Files != 5 || !files.Truncated || len(files.Matches) != 5 {
		t.Fatalf("MaxFiles 5: %d files, %d matches", files.Files, len(files.Matches))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Search(ctx, rp, regexp.MustCompile("hit"), SearchOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled search: %v", err)
	}
}

// TestAsUsers runs the escape tests again as an unprivileged uid when the
// test runs as root (DAC then no longer hides the outside files' owner
// differences: both runs must pass on confinement alone).
func TestAsUsers(t *testing.T) {
	if os.Getenv(asUserEnv) != "" {
		t.Skip("already the re-executed run")
	}
	for _, u := range testutil.Users(t) {
		if u.UID == os.Geteuid() {
			continue // this process's own run is the other tests
		}
		t.Run(u.Name, func(t *testing.T) {
			bin := testutil.SelfBinary(t)
			tmp := testutil.Workdir(t, u.UID)
			cmd := exec.Command(bin, "-test.run", "^(TestEscapes|TestSymlinksInsideRoot|TestSpecialFiles|TestSwapDuringOperation|TestPatch.*)$", "-test.count=1")
			cmd.Env = []string{asUserEnv + "=" + strconv.Itoa(u.UID), "TMPDIR=" + tmp, "PATH=/usr/bin:/bin"}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "PASS") {
				t.Fatalf("as %s: %v\n%s", u.Name, err, out)
			}
		})
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveSharedDir()
	os.Exit(code)
}
