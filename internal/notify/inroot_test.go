//go:build linux

package notify

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWalk walks a tree standing for a command's root with walk, from its
// root and from a subdirectory: absolute paths and absolute symlinks stay
// in that root, ".." stops at it, and each walk ends where the kernel's
// own walk would for a process whose root it is (want), or fails as it
// would (errno).
func TestWalk(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"a/b", "c"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"abs":     "/a",           // absolute: the command's /a, not the host's
		"a/up":    "../..",        // climbs to the root and stops there
		"a/out":   "../../../../", // as far up as ".." allows: the root
		"loop":    "loop",
		"dangle":  "/nowhere",
		"a/b/rel": "../../c",
		"hostabs": root, // the host's path of the root: absent in the command's tree
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	open := func(p string) int {
		fd, err := unix.Open(p, unix.O_PATH|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	rootFD, subFD := open(root), open(filepath.Join(root, "a"))
	for _, c := range []struct {
		from   int
		path   string
		follow bool
		want   string // relative to root
		errno  unix.Errno
	}{
		{rootFD, "/a/b", true, "a/b", 0},
		{rootFD, "abs/b", true, "a/b", 0},
		{subFD, "b/rel", true, "c", 0},
		{subFD, "up/c", true, "c", 0},
		{subFD, "out/c", true, "c", 0},
		{subFD, "../../../..", true, ".", 0},
		{subFD, "/../../c", true, "c", 0},
		{subFD, "./b/../b/.", true, "a/b", 0},
		{rootFD, "abs", false, "abs", 0},
		{rootFD, "abs/", false, "a", 0},
		{rootFD, "loop/x", true, "", unix.ELOOP},
		{rootFD, "dangle", true, "", unix.ENOENT},
		{rootFD, "f/x", true, "", unix.ENOTDIR},
		{rootFD, "hostabs" + root, true, "", unix.ENOENT},
		{rootFD, "/", true, ".", 0},
	} {
		tk := &task{root: rootFD, pidfd: -1, mem: memReader{fd: -1}}
		fd, e := tk.walk(c.from, c.path, c.follow)
		if e != c.errno {
			t.Errorf("walk(%q): errno %v, want %v", c.path, e, c.errno)
		} else if e == 0 {
			got, _ := idOf(fd)
			want, _ := idOf(open(filepath.Join(root, c.want)))
			if got != want {
				t.Errorf("walk(%q) did not end at %s", c.path, c.want)
			}
		}
		tk.close()
	}

	// A long walk holds one descriptor at a time and leaves only its
	// result to the task.
	tk := &task{root: rootFD, pidfd: -1, mem: memReader{fd: -1}}
	long := "a/" + strings.Repeat("b/../", 200) + "b"
	if _, e := tk.walk(rootFD, long, true); e != 0 || len(tk.fds) != 1 {
		t.Errorf("walk(a/ + b/../ x 200 + b): errno %v, %d descriptors kept, want 0 and 1", e, len(tk.fds))
	}
	tk.close()

	// procfs's self and thread-self are the task's own ids in its pid
	// namespace (here the test's own); magic links are refused.
	self, tid := strconv.Itoa(os.Getpid()), strconv.Itoa(unix.Gettid())
	for _, c := range []struct {
		ns    bool // the task's namespace ids are known
		path  string
		want  string // under /proc
		errno unix.Errno
	}{
		{true, "self/fd", self + "/fd", 0},
		{true, "thread-self/fdinfo", self + "/task/" + tid + "/fdinfo", 0},
		{true, "self/missing/x", "", unix.ENOENT},
		{true, "self/cwd/x", "", unix.EACCES},
		{false, "self/fd", "", unix.ENOENT},
	} {
		tk := &task{root: open("/"), pidfd: -1, mem: memReader{fd: -1}}
		if c.ns {
			tk.nsTgid, tk.nsPid = self, tid
		}
		fd, e := tk.walk(open("/proc"), c.path, true)
		switch {
		case e != c.errno:
			t.Errorf("walk(/proc/%s): errno %v, want %v", c.path, e, c.errno)
		case e == 0:
			got, _ := idOf(fd)
			want, _ := idOf(open(filepath.Join("/proc", c.want)))
			if got != want {
				t.Errorf("walk(/proc/%s) did not end at /proc/%s", c.path, c.want)
			}
		}
		tk.close()
	}
}
