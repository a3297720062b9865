//go:build linux && (amd64 || arm64)

package notify

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// fileOp makes the calls of files.go for the probe (rename and link are
// legacyCall's): Path is the source (or the file to truncate, to Mode
// bytes), Alt the destination; renameat2 and linkat take Dir as both
// directory descriptors and Flags.
func fileOp(op probeOp, sys func(uintptr, ...uintptr) unix.Errno, d uintptr, path, alt []byte) unix.Errno {
	defer func() { _ = alt[0] }() // keeps alt alive across the call
	switch op.Call {
	case "truncate":
		return sys(unix.SYS_TRUNCATE, ptr(path), uintptr(int64(int32(op.Mode))))
	case "renameat2":
		return sys(unix.SYS_RENAMEAT2, d, ptr(path), d, ptr(alt), uintptr(op.Flags))
	}
	return sys(unix.SYS_LINKAT, d, ptr(path), d, ptr(alt), uintptr(op.Flags))
}

// fileCases attack and use the old-ABI file handlers. The fixture gets
// w/r1..w/r7 and out/o1, owned by the user, besides newFixture's files; the
// harness has no Landlock, so a call the supervisor resumes in the kernel
// (same directory) succeeds as it would under Landlock ABI 1.
func fileCases(uid int) []tcase {
	type P = probeOp
	return []tcase{
		// set-user-ID and set-group-ID bits.
		{P{Name: "chmod setuid inside", Call: "chmod", Path: "w/f", Mode: 0o4755}, unix.EPERM, ok},
		{P{Name: "fchmod setgid file inside", Call: "fchmod", FD: "w/f2", Mode: 0o2755}, unix.EPERM, ok},
		{P{Name: "fchmodat setuid dir", Call: "fchmodat", Dir: "w", Path: "sub", Mode: 0o4755}, unix.EPERM, ok},
		{P{Name: "chmod setgid dir", Call: "chmod", Path: "w/sub", Mode: 0o2755}, ok, ok},
		{P{Name: "chmod plain after refusals", Call: "chmod", Path: "w/f", Mode: 0o700}, ok, ok},

		// truncate(2).
		{P{Name: "truncate inside", Call: "truncate", Path: "w/r1", Mode: 1}, ok, ok},
		{P{Name: "truncate outside", Call: "truncate", Path: "out/o1", Mode: 0}, unix.EACCES, ok},
		{P{Name: "truncate outside absolute", Call: "truncate", Path: "$BASE/out/f", Mode: 0}, unix.EACCES, ok},
		{P{Name: "truncate symlink to outside", Call: "truncate", Path: "w/lnk", Mode: 0}, unix.EACCES, ok},
		{P{Name: "truncate dotdot escape", Call: "truncate", Path: "w/../out/f", Mode: 0}, unix.EACCES, ok},
		{P{Name: "truncate /proc/self/fd outside", Call: "truncate", ProcSelfFD: true, FD: "out/f", Mode: 0}, unix.EACCES, ok},
		{P{Name: "truncate negative", Call: "truncate", Path: "w/r1", Mode: 0xffffffff}, unix.EINVAL, unix.EINVAL},
		{P{Name: "truncate missing", Call: "truncate", Path: "w/nope", Mode: 0}, unix.ENOENT, unix.ENOENT},
		{P{Name: "truncate directory", Call: "truncate", Path: "w/sub", Mode: 0}, unix.EISDIR, unix.EISDIR},
		{P{Name: "truncate not writable", Call: "truncate", Path: "w/rootfile", Mode: 0}, byUID(uid, ok, unix.EACCES), byUID(uid, ok, unix.EACCES)},

		// rename and link across directories.
		{P{Name: "rename into subdirectory", Call: "rename", Path: "w/r2", Alt: "w/sub/r2"}, ok, ok},
		{P{Name: "rename within a directory", Call: "rename", Path: "w/r3", Alt: "w/r3b"}, ok, ok},
		{P{Name: "rename out", Call: "rename", Path: "w/r4", Alt: "out/r4"}, unix.EXDEV, ok},
		{P{Name: "rename in", Call: "rename", Path: "out/o1", Alt: "w/stolen"}, unix.EXDEV, ok},
		{P{Name: "rename out absolute", Call: "rename", Path: "$BASE/w/r5", Alt: "$BASE/out/r5"}, unix.EXDEV, ok},
		{P{Name: "rename a directory out", Call: "rename", Path: "w/gd", Alt: "out/gd"}, unix.EXDEV, ok},
		{P{Name: "renameat2 exchange across", Call: "renameat2", Dir: "w", Path: "f2", Alt: "sub/r2", Flags: unix.RENAME_EXCHANGE}, ok, ok},
		{P{Name: "renameat2 noreplace across", Call: "renameat2", Dir: "w", Path: "f2", Alt: "sub/r2", Flags: unix.RENAME_NOREPLACE}, unix.EEXIST, unix.EEXIST},
		{P{Name: "renameat2 whiteout across", Call: "renameat2", Dir: "w", Path: "r7", Alt: "sub/r7", Flags: unix.RENAME_WHITEOUT}, ok, ok},
		{P{Name: "renameat2 bad flags", Call: "renameat2", Dir: "w", Path: "r6", Alt: "sub/r6", Flags: 8}, unix.EINVAL, unix.EINVAL},
		{P{Name: "rename trailing slash on file", Call: "rename", Path: "w/r6/", Alt: "w/sub/r6"}, unix.ENOTDIR, unix.ENOTDIR},
		{P{Name: "rename missing", Call: "rename", Path: "w/nope", Alt: "w/sub/nope"}, unix.ENOENT, unix.ENOENT},
		{P{Name: "link into subdirectory", Call: "link", Path: "w/r6", Alt: "w/sub/r6link"}, ok, ok},
		{P{Name: "link out", Call: "link", Path: "w/r6", Alt: "out/r6link"}, unix.EXDEV, ok},
		{P{Name: "link in", Call: "link", Path: "out/f", Alt: "w/sub/flink"}, unix.EXDEV, ok},
		{P{Name: "linkat follow symlink to outside", Call: "linkat", Dir: "w", Path: "lnk", Alt: "sub/lnklink", Flags: unix.AT_SYMLINK_FOLLOW}, unix.EXDEV, ok},
		{P{Name: "linkat follow symlink to inside", Call: "linkat", Dir: "w", Path: "lnkin", Alt: "sub/lnkinlink", Flags: unix.AT_SYMLINK_FOLLOW}, ok, ok},
		{P{Name: "linkat nofollow symlink to outside", Call: "linkat", Dir: "w", Path: "lnk", Alt: "sub/lnkself"}, ok, ok},
		{P{Name: "linkat bad flags", Call: "linkat", Dir: "w", Path: "r6", Alt: "sub/x", Flags: 0x1}, unix.EINVAL, unix.EINVAL},
	}
}

// TestFiles runs fileCases confined and unconfined, as root and as an
// unprivileged uid, and checks that nothing outside the root changed and the
// moves inside happened.
func TestFiles(t *testing.T) {
	needRoot(t)
	for _, uid := range []int{0, 65534} {
		t.Run(fmt.Sprintf("uid%d", uid), func(t *testing.T) {
			prep := func() *fixture {
				fx := newFixture(t, uid)
				for _, n := range []string{"w/r1", "w/r2", "w/r3", "w/r4", "w/r5", "w/r6", "w/r7", "out/o1"} {
					p := filepath.Join(fx.base, n)
					if err := os.WriteFile(p, []byte("data"), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(p, uid, uid); err != nil {
						t.Fatal(err)
					}
				}
				return fx
			}
			cases := forArch(t, fileCases(uid))
			ctl := prep()
			checkResults(t, "control", cases, runProbe(t, ctl, opsOf(cases), runOpts{dropCaps: true}), false)

			fx := prep()
			outBefore := snapshot(t, fx.out)
			stats := &Stats{}
			res := runProbe(t, fx, opsOf(cases), runOpts{confined: true, dropCaps: true, cfg: fx.config(stats)})
			checkResults(t, "confined", cases, res, true)
			if after := snapshot(t, fx.out); !mapsEqual(outBefore, after) {
				t.Errorf("outside tree changed:\nbefore %v\nafter  %v", outBefore, after)
			}
			for _, n := range []string{"w/sub/r2", "w/f2", "w/sub/r7", "w/r7", "w/r3b", "w/sub/r6link", "w/sub/lnkinlink"} {
				if _, err := os.Lstat(filepath.Join(fx.base, n)); err != nil {
					t.Errorf("confined: %s missing: %v", n, err)
				}
			}
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(fx.w, "r1"), &st); err != nil || st.Size != 1 {
				t.Errorf("confined: w/r1 size %d, want 1 (%v)", st.Size, err)
			}
			if err := unix.Stat(filepath.Join(fx.w, "f"), &st); err != nil || st.Mode&0o7777 != 0o700 {
				t.Errorf("confined: w/f mode %o, want 700 (%v)", st.Mode&0o7777, err)
			}
			denied := map[string]int{}
			for _, d := range stats.Denials() {
				denied[d.Syscall]++
			}
			if denied["truncate"] == 0 || denied[nativeCall("rename")] == 0 || denied[nativeCall("link")] == 0 || denied[nativeCall("chmod")] == 0 {
				t.Errorf("denials not recorded per call: %v", denied)
			}
		})
	}
}

// TestMkdirDropsSetIDBits pins the kernel behaviour that lets mkdir and
// mkdirat go unfiltered: vfs_mkdir keeps only the permission and sticky
// bits of the mode, so a new directory gets S_ISGID only from a set-group-ID
// parent, never from its caller.
func TestMkdirDropsSetIDBits(t *testing.T) {
	d := filepath.Join(t.TempDir(), "d")
	if err := unix.Mkdir(d, 0o6755); err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Stat(d, &st); err != nil {
		t.Fatal(err)
	}
	if st.Mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
		t.Errorf("mkdir(0o6755) made mode %#o: the kernel keeps set-ID bits, mkdir needs a filter rule", st.Mode&0o7777)
	}
}

// TestHandlesEveryNotifiedCall: every call the filter can hand to the
// supervisor (every flag on) has a handler; a call without one would be
// refused with EACCES as "not handled".
func TestHandlesEveryNotifiedCall(t *testing.T) {
	arch, err := seccomp.NativeArch()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := seccomp.Denied(plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true,
		NotifyProcTargets: true, NotifySignals: true, NotifyTruncate: true, NotifyRename: true, NotifyFork: true, NotifyInet: true})
	if err != nil {
		t.Fatal(err)
	}
	handled := Syscalls()
	n := 0
	for _, r := range rules {
		if r.Notify {
			n++
			if !slices.Contains(handled, r.Syscall) {
				t.Errorf("the filter notifies %s, which the supervisor does not handle", r.Syscall)
			}
		}
	}
	if n != len(handled) {
		t.Errorf("the filter notifies %d calls, the supervisor handles %d (%v)", n, len(handled), handled)
	}
}

// TestHandlesEveryCreateCall: with NotifyCreate the filter notifies
// exactly Syscalls and CreateSyscalls.
func TestHandlesEveryCreateCall(t *testing.T) {
	arch, err := seccomp.NativeArch()
	if err != nil {
		t.Fatal(err)
	}
	rules, err := seccomp.Denied(plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true,
		NotifyProcTargets: true, NotifySignals: true, NotifyTruncate: true, NotifyRename: true, NotifyFork: true, NotifyInet: true, NotifyCreate: true, NotifyGuardTree: true})
	if err != nil {
		t.Fatal(err)
	}
	var notified []string
	for _, r := range rules {
		if r.Notify && !slices.Contains(notified, r.Syscall) {
			notified = append(notified, r.Syscall)
		}
	}
	want := append(Syscalls(), CreateSyscalls()...)
	slices.Sort(want)
	slices.Sort(notified)
	if !slices.Equal(notified, want) {
		t.Errorf("the filter notifies %v\nthe supervisor handles %v", notified, want)
	}
}

func TestSplitParent(t *testing.T) {
	for _, c := range []struct{ in, parent, last string }{
		{"f", "", "f"},
		{"d/f", "d", "f"},
		{"d//f", "d", "f"},
		{"d/f/", "d", "f/"},
		{"/f", "/", "f"},
		{"//f", "/", "f"},
		{"/a/b/c", "/a/b", "c"},
		{"/a/b/c//", "/a/b", "c//"},
		{"/", "/", "."},
		{"///", "/", "."},
		{"..", "", ".."},
		{"a/..", "a", ".."},
		{"/proc/self/fd/5/x", "/proc/self/fd/5", "x"},
	} {
		if p, l := splitParent(c.in); p != c.parent || l != c.last {
			t.Errorf("splitParent(%q) = %q, %q; want %q, %q", c.in, p, l, c.parent, c.last)
		}
	}
}
