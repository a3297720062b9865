//go:build linux && (amd64 || arm64)

package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/plan"
)

// createOp makes create.go's calls for the probe: Path (from Dir) is the
// name created, Alt a symlink's target; "openat-creat" opens with
// O_CREAT|Flags and writes one byte through the descriptor it gets.
func createOp(op probeOp, sys func(uintptr, ...uintptr) unix.Errno, d uintptr, path, alt []byte) unix.Errno {
	defer func() { _ = alt[0] }() // keeps alt alive across the call
	switch op.Call {
	case "mkdirat":
		return sys(unix.SYS_MKDIRAT, d, ptr(path), uintptr(op.Mode))
	case "symlinkat":
		return sys(unix.SYS_SYMLINKAT, ptr(alt), d, ptr(path))
	case "mknodat":
		return sys(unix.SYS_MKNODAT, d, ptr(path), uintptr(op.Mode), 0)
	}
	fd, _, e := unix.Syscall6(unix.SYS_OPENAT, d, ptr(path), uintptr(unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC|op.Flags), uintptr(op.Mode), 0, 0)
	if e != 0 {
		return e
	}
	defer unix.Close(int(fd))
	if _, err := unix.Write(int(fd), []byte{'x'}); err != nil {
		return errnoOf(err)
	}
	return 0
}

// createCases: a new .git (and its variants) is refused wherever it is
// asked for; every other name is created as the kernel would create it,
// inside the writable root on the handler's thread, elsewhere on the
// confined thread, whose Landlock rules refuse it.
func createCases() []tcase {
	type P = probeOp
	return []tcase{
		{P{Name: "mkdir .git", Call: "mkdirat", Path: "w/d1/.git", Mode: 0o755}, unix.EPERM, ok},
		{P{Name: "mkdir .GIT trailing slash", Call: "mkdirat", Path: "w/.GIT/", Mode: 0o755}, unix.EPERM, ok},
		{P{Name: "mkdir git~1 from dirfd", Call: "mkdirat", Dir: "w", Path: "git~1", Mode: 0o755}, unix.EPERM, ok},
		{P{Name: "mkdir plain", Call: "mkdirat", Path: "w/newdir", Mode: 0o777}, ok, ok},
		{P{Name: "mkdir outside", Call: "mkdirat", Path: "out/newdir", Mode: 0o755}, unix.EACCES, ok},
		{P{Name: "gitfile", Call: "openat-creat", Path: "w/d2/.git", Mode: 0o644}, unix.EPERM, ok},
		{P{Name: "gitfile with trailing dot", Call: "openat-creat", Path: "w/sub/.git.", Mode: 0o644}, unix.EPERM, ok},
		{P{Name: "create plain", Call: "openat-creat", Path: "w/newfile", Mode: 0o666}, ok, ok},
		{P{Name: "create existing", Call: "openat-creat", Path: "w/f", Mode: 0o644}, ok, ok},
		{P{Name: "create excl existing", Call: "openat-creat", Path: "w/f", Mode: 0o644, Flags: unix.O_EXCL}, unix.EEXIST, unix.EEXIST},
		{P{Name: "create outside", Call: "openat-creat", Path: "out/newfile", Mode: 0o644}, unix.EACCES, ok},
		{P{Name: "create through symlink to outside", Call: "openat-creat", Path: "w/lnk", Mode: 0o644}, unix.EACCES, ok},
		{P{Name: "create through symlink inside", Call: "openat-creat", Path: "w/lnkin", Mode: 0o644}, ok, ok},
		{P{Name: "create dangling symlink to .git", Call: "openat-creat", Path: "w/dangling", Mode: 0o644}, unix.EPERM, ok},
		{P{Name: "create /proc/self/fd", Call: "openat-creat", ProcSelfFD: true, FD: "w/f2", FDFlags: unix.O_RDONLY, Mode: 0o644}, ok, ok},
		{P{Name: "symlink .git", Call: "symlinkat", Path: "w/d4/.git", Alt: "evil"}, unix.EPERM, ok},
		{P{Name: "symlink plain", Call: "symlinkat", Path: "w/sub/l2", Alt: "evil"}, ok, ok},
		{P{Name: "fifo .git", Call: "mknodat", Path: "w/.git", Mode: unix.S_IFIFO | 0o644}, unix.EPERM, ok},
		{P{Name: "fifo plain", Call: "mknodat", Path: "w/fifo", Mode: unix.S_IFIFO | 0o644}, ok, ok},
		{P{Name: "rename to .git", Call: "rename", Path: "w/gd", Alt: "w/d5/.git"}, unix.EPERM, ok},
		{P{Name: "link to .Git", Call: "link", Path: "w/f2", Alt: "w/.Git"}, unix.EPERM, ok},
		{P{Name: "rename plain across", Call: "rename", Path: "w/g", Alt: "w/sub/g"}, ok, ok},
	}
}

// TestCreate runs createCases under Config.Create and unconfined, as root
// and as 65534, and checks no .git was left and the modes the umask gives.
func TestCreate(t *testing.T) {
	needRoot(t)
	if _, _, err := landlock.ABI(); err != nil {
		t.Skipf("the confined thread needs Landlock: %v", err)
	}
	t.Setenv(envCreate, "1")
	for _, c := range []struct {
		uid   int
		refer bool
	}{{0, true}, {65534, true}, {0, false}, {65534, false}} {
		uid := c.uid
		// Without Refer (Landlock ABI 1) renames and links go through
		// renameLink's emulation first.
		t.Run(fmt.Sprintf("uid%d/refer=%v", uid, c.refer), func(t *testing.T) {
			prep := func() *fixture {
				fx := newFixture(t, uid)
				for _, d := range []string{"d1", "d2", "d3", "d4", "d5"} {
					if err := os.Mkdir(filepath.Join(fx.w, d), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(filepath.Join(fx.w, d), uid, uid); err != nil {
						t.Fatal(err)
					}
				}
				p := filepath.Join(fx.w, "dangling")
				if err := os.Symlink("d3/.git", p); err != nil {
					t.Fatal(err)
				}
				if err := os.Lchown(p, uid, uid); err != nil {
					t.Fatal(err)
				}
				return fx
			}
			cases := forArch(t, createCases())
			ctl := prep()
			checkResults(t, "control", cases, runProbe(t, ctl, opsOf(cases), runOpts{dropCaps: true}), false)

			fx := prep()
			stats := &Stats{}
			cfg := fx.config(stats)
			cfg.Create = &Create{}
			cfg.Plan.Seccomp.NotifyRename = !c.refer
			cfg.Plan.Landlock = plan.Landlock{
				ReadExec: []string{"/usr", "/lib", "/lib64", "/bin", "/etc", fx.base, filepath.Dir(testBin)}, ReadWrite: []string{fx.w},
				// The system directories a guest may lack (the arm64
				// CI guest has no /lib).
				Optional: []string{"/usr", "/lib", "/lib64", "/bin", "/etc"}}
			res := runProbe(t, fx, opsOf(cases), runOpts{confined: true, dropCaps: true, cfg: cfg})
			checkResults(t, "confined", cases, res, true)
			for _, d := range stats.Denials() {
				// Only the guard refuses; Landlock's refusals are
				// ordinary failures of the confined thread's calls.
				if !strings.HasPrefix(d.Reason, "persistence guard:") {
					t.Errorf("denied %s %s: %s (%s)", d.Syscall, d.Path, d.Reason, d.Errno)
				}
			}
			for _, n := range []string{"w/d1/.git", "w/d2/.git", "w/d3/.git", "w/d4/.git", "w/d5/.git", "w/.GIT", "w/git~1", "w/sub/.git.", "w/.git", "w/.Git"} {
				if _, err := os.Lstat(filepath.Join(fx.base, n)); err == nil {
					t.Errorf("%s was created", n)
				}
			}
			for n, want := range map[string]uint32{"w/newdir": unix.S_IFDIR | 0o755, "w/newfile": unix.S_IFREG | 0o644, "w/fifo": unix.S_IFIFO | 0o644} {
				var st unix.Stat_t
				if err := unix.Lstat(filepath.Join(fx.base, n), &st); err != nil {
					t.Errorf("%s: %v", n, err)
					continue
				}
				if st.Mode != want || int(st.Uid) != uid {
					t.Errorf("%s: mode %#o uid %d, want %#o uid %d (umask 022)", n, st.Mode, st.Uid, want, uid)
				}
			}
		})
	}
}
