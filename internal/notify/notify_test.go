//go:build linux && (amd64 || arm64)

package notify

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// tcase is one probe operation with the errno expected when confined
// (supervised by Serve) and in the unconfined control run.
type tcase struct {
	op                probeOp
	confined, control unix.Errno
}

const ok = unix.Errno(0)

// byUID picks the expectation for root or for an unprivileged uid.
func byUID(uid int, root, other unix.Errno) unix.Errno {
	if uid == 0 {
		return root
	}
	return other
}

// policyCases are run by a probe without capabilities, as uid 0 or uid
// 65534; the fixture's files belong to that uid.
func policyCases(uid int, abstract string) []tcase {
	type P = probeOp
	nofollow, empty := unix.AT_SYMLINK_NOFOLLOW, unix.AT_EMPTY_PATH
	return []tcase{
		// chmod family.
		{P{Name: "chmod inside", Call: "chmod", Path: "w/f", Mode: 0o600}, ok, ok},
		{P{Name: "chmod outside", Call: "chmod", Path: "out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "chmod outside absolute", Call: "chmod", Path: "$BASE/out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "chmod symlink to outside", Call: "chmod", Path: "w/lnk", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "chmod symlink to inside", Call: "chmod", Path: "w/lnkin", Mode: 0o640}, ok, ok},
		{P{Name: "chmod dotdot escape", Call: "chmod", Path: "w/../out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "chmod the root itself", Call: "chmod", Path: "w", Mode: 0o755}, ok, ok},
		{P{Name: "chmod parent of the root", Call: "chmod", Path: ".", Mode: 0o755}, unix.EACCES, ok},
		{P{Name: "chmod missing", Call: "chmod", Path: "w/nope", Mode: 0o600}, unix.ENOENT, unix.ENOENT},
		{P{Name: "chmod NULL", Call: "chmod", NullPath: true, Mode: 0o600}, unix.EFAULT, unix.EFAULT},
		{P{Name: "chmod empty path", Call: "chmod", Path: "", Mode: 0o600}, unix.ENOENT, unix.ENOENT},
		{P{Name: "chmod path too long", Call: "chmod", Path: "w/" + strings.Repeat("a/", 2100), Mode: 0o600}, unix.ENAMETOOLONG, unix.ENAMETOOLONG},
		{P{Name: "chmod /proc/self/fd inside", Call: "chmod", ProcSelfFD: true, FD: "w/f", Mode: 0o600}, ok, ok},
		{P{Name: "chmod /proc/self/fd outside", Call: "chmod", ProcSelfFD: true, FD: "out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "chmod /dev/fd inside", Call: "chmod", Path: "/dev/fd/$FD", FD: "w/f", Mode: 0o600}, ok, ok},
		{P{Name: "chmod /proc/self/fd O_PATH outside", Call: "chmod", ProcSelfFD: true, FD: "out/f", FDFlags: unix.O_PATH, Mode: 0o600}, unix.EACCES, ok},
		// Magic links are not followed by the supervisor (documented).
		{P{Name: "chmod through magic link", Call: "chmod", Path: "/proc/self/cwd/out/f", Mode: 0o600}, unix.ELOOP, ok},
		{P{Name: "chmod not owner", Call: "chmod", Path: "w/rootfile", Mode: 0o600}, byUID(uid, ok, unix.EPERM), byUID(uid, ok, unix.EPERM)},
		{P{Name: "chmod behind untraversable dir", Call: "chmod", Path: "w/priv/f", Mode: 0o600}, byUID(uid, ok, unix.EACCES), byUID(uid, ok, unix.EACCES)},
		// The kernel strips S_ISGID when the caller is not in the file's
		// group and lacks CAP_FSETID: the root supervisor must not keep it.
		// (S_ISGID is refused on anything but a directory.)
		{P{Name: "chmod setgid foreign group", Call: "chmod", Path: "w/gd", Mode: 0o2755}, ok, ok},
		{P{Name: "fchmodat dirfd inside", Call: "fchmodat", Dir: "w", Path: "f", Mode: 0o600}, ok, ok},
		{P{Name: "fchmodat dirfd outside", Call: "fchmodat", Dir: "out", Path: "f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "fchmodat dirfd dotdot", Call: "fchmodat", Dir: "w", Path: "../out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "fchmodat2 nofollow symlink", Call: "fchmodat2", Path: "w/lnk", Mode: 0o600, Flags: nofollow}, unix.EOPNOTSUPP, unix.EOPNOTSUPP},
		{P{Name: "fchmodat2 nofollow file", Call: "fchmodat2", Path: "w/f", Mode: 0o600, Flags: nofollow}, ok, ok},
		{P{Name: "fchmodat2 empty O_PATH inside", Call: "fchmodat2", FD: "w/f", FDFlags: unix.O_PATH, Mode: 0o600, Flags: empty}, ok, ok},
		{P{Name: "fchmodat2 empty O_PATH outside", Call: "fchmodat2", FD: "out/f", FDFlags: unix.O_PATH, Mode: 0o600, Flags: empty}, unix.EACCES, ok},
		{P{Name: "fchmodat2 bad flags", Call: "fchmodat2", Path: "w/f", Mode: 0o600, Flags: 0x40000}, unix.EINVAL, unix.EINVAL},
		{P{Name: "fchmod inside", Call: "fchmod", FD: "w/f", Mode: 0o600}, ok, ok},
		{P{Name: "fchmod outside read-only fd", Call: "fchmod", FD: "out/f", Mode: 0o600}, unix.EACCES, ok},
		{P{Name: "fchmod O_PATH fd", Call: "fchmod", FD: "w/f", FDFlags: unix.O_PATH, Mode: 0o600}, unix.EBADF, unix.EBADF},

		// chown family.
		{P{Name: "chown inside to self", Call: "chown", Path: "w/f", Owner: "self", Group: "self"}, ok, ok},
		{P{Name: "chown inside to another uid", Call: "chown", Path: "w/f", Owner: "12345"}, unix.EPERM, unix.EPERM},
		{P{Name: "chgrp inside to a foreign group", Call: "chown", Path: "w/f", Group: "12345"}, unix.EPERM, unix.EPERM},
		{P{Name: "chown outside", Call: "chown", Path: "out/f", Owner: "self", Group: "self"}, unix.EACCES, ok},
		{P{Name: "chown symlink to outside", Call: "chown", Path: "w/lnk", Owner: "self"}, unix.EACCES, ok},
		{P{Name: "lchown symlink itself", Call: "lchown", Path: "w/lnk", Owner: "self", Group: "self"}, ok, ok},
		{P{Name: "fchownat nofollow symlink itself", Call: "fchownat", Dir: "w", Path: "lnk", Owner: "self", Flags: nofollow}, ok, ok},
		{P{Name: "fchownat follow symlink", Call: "fchownat", Dir: "w", Path: "lnk", Owner: "self"}, unix.EACCES, ok},
		{P{Name: "fchownat empty path cwd", Call: "fchownat", Path: "", Owner: "self", Flags: empty}, unix.EACCES, ok},
		{P{Name: "fchown inside", Call: "fchown", FD: "w/f", Owner: "self"}, ok, ok},
		{P{Name: "fchown outside", Call: "fchown", FD: "out/f", Owner: "self"}, unix.EACCES, ok},

		// utimes family.
		{P{Name: "utimensat now inside", Call: "utimensat", Path: "w/f"}, ok, ok},
		{P{Name: "utimensat now outside", Call: "utimensat", Path: "out/f"}, unix.EACCES, ok},
		{P{Name: "utimensat UTIME_NOW inside", Call: "utimensat", Path: "w/f", Times: "now"}, ok, ok},
		{P{Name: "utimensat explicit inside", Call: "utimensat", Path: "w/f2", Times: "explicit"}, ok, ok},
		{P{Name: "utimensat explicit outside", Call: "utimensat", Path: "out/f", Times: "explicit"}, unix.EACCES, ok},
		{P{Name: "utimensat omit outside", Call: "utimensat", Path: "out/f", Times: "omit"}, ok, ok},
		{P{Name: "utimensat nofollow symlink", Call: "utimensat", Path: "w/lnk", Flags: nofollow}, ok, ok},
		{P{Name: "utimensat now not owner", Call: "utimensat", Path: "w/rootfile"}, byUID(uid, ok, unix.EACCES), byUID(uid, ok, unix.EACCES)},
		{P{Name: "utimensat explicit not owner", Call: "utimensat", Path: "w/rootfile", Times: "explicit"}, byUID(uid, ok, unix.EPERM), byUID(uid, ok, unix.EPERM)},
		{P{Name: "futimens inside", Call: "utimensat", NullPath: true, FD: "w/f"}, ok, ok},
		{P{Name: "futimens outside", Call: "utimensat", NullPath: true, FD: "out/f"}, unix.EACCES, ok},
		{P{Name: "utime inside", Call: "utime", Path: "w/f"}, ok, ok},
		{P{Name: "utime explicit inside", Call: "utime", Path: "w/f", Times: "explicit"}, ok, ok},
		{P{Name: "utime outside", Call: "utime", Path: "out/f"}, unix.EACCES, ok},
		{P{Name: "utimes explicit inside", Call: "utimes", Path: "w/f", Times: "explicit"}, ok, ok},
		{P{Name: "utimes outside", Call: "utimes", Path: "out/f"}, unix.EACCES, ok},
		{P{Name: "futimesat dirfd inside", Call: "futimesat", Dir: "w", Path: "f"}, ok, ok},
		{P{Name: "futimesat NULL path outside fd", Call: "futimesat", NullPath: true, FD: "out/f"}, unix.EACCES, ok},

		// xattrs.
		{P{Name: "setxattr inside", Call: "setxattr", Path: "w/f", XName: "user.t", XValue: "v"}, ok, ok},
		{P{Name: "setxattr outside", Call: "setxattr", Path: "out/f", XName: "user.t", XValue: "v"}, unix.EACCES, ok},
		{P{Name: "setxattr symlink to outside", Call: "setxattr", Path: "w/lnk", XName: "user.s", XValue: "v"}, unix.EACCES, ok},
		{P{Name: "lsetxattr symlink itself", Call: "lsetxattr", Path: "w/lnk", XName: "user.t", XValue: "v"}, unix.EPERM, unix.EPERM},
		{P{Name: "setxattr trusted", Call: "setxattr", Path: "w/f", XName: "trusted.t", XValue: "v"}, unix.EPERM, unix.EPERM},
		{P{Name: "setxattr security", Call: "setxattr", Path: "w/f", XName: "security.t", XValue: "v"}, unix.EPERM, unix.EPERM},
		{P{Name: "setxattr unknown namespace", Call: "setxattr", Path: "w/f", XName: "bogus.t", XValue: "v"}, unix.EOPNOTSUPP, unix.EOPNOTSUPP},
		{P{Name: "setxattr empty name", Call: "setxattr", Path: "w/f", XName: "", XValue: "v"}, unix.ERANGE, unix.ERANGE},
		{P{Name: "setxattr not owner", Call: "setxattr", Path: "w/rootfile", XName: "user.t", XValue: "v"}, byUID(uid, ok, unix.EACCES), byUID(uid, ok, unix.EACCES)},
		{P{Name: "fsetxattr inside", Call: "fsetxattr", FD: "w/f", XName: "user.f", XValue: "fv"}, ok, ok},
		{P{Name: "fsetxattr outside", Call: "fsetxattr", FD: "out/f", XName: "user.f", XValue: "fv"}, unix.EACCES, ok},
		{P{Name: "setxattrat inside", Call: "setxattrat", Dir: "w", Path: "f", XName: "user.at", XValue: "a"}, ok, ok},
		{P{Name: "setxattrat outside", Call: "setxattrat", Dir: "out", Path: "f", XName: "user.at", XValue: "a"}, unix.EACCES, ok},
		{P{Name: "setxattrat empty fd outside", Call: "setxattrat", FD: "out/f", Path: "", Flags: empty, XName: "user.at2", XValue: "a"}, unix.EACCES, ok},
		{P{Name: "removexattr inside", Call: "removexattr", Path: "w/f", XName: "user.t"}, ok, ok},
		{P{Name: "removexattr outside", Call: "removexattr", Path: "out/f", XName: "user.pre"}, unix.EACCES, ok},
		{P{Name: "lremovexattr symlink", Call: "lremovexattr", Path: "w/lnk", XName: "user.t"}, unix.EPERM, unix.EPERM},
		{P{Name: "fremovexattr inside", Call: "fremovexattr", FD: "w/f", XName: "user.f"}, ok, ok},
		{P{Name: "fremovexattr outside", Call: "fremovexattr", FD: "out/f", XName: "user.pre2"}, unix.EACCES, ok},
		{P{Name: "removexattrat inside", Call: "removexattrat", Dir: "w", Path: "f", XName: "user.at"}, ok, ok},
		{P{Name: "removexattrat outside", Call: "removexattrat", Dir: "out", Path: "f", XName: "user.pre3"}, unix.EACCES, ok},

		// connect.
		{P{Name: "connect inside", Call: "connect", Sock: "$BASE/w/s.sock"}, ok, ok},
		{P{Name: "connect inside relative", Call: "connect", Sock: "w/s.sock"}, ok, ok},
		{P{Name: "connect outside", Call: "connect", Sock: "$BASE/out/s.sock"}, unix.EACCES, ok},
		{P{Name: "connect symlink to outside", Call: "connect", Sock: "$BASE/w/slnk"}, unix.EACCES, ok},
		{P{Name: "connect allowlisted", Call: "connect", Sock: "$BASE/out/allowed.sock"}, ok, ok},
		{P{Name: "connect abstract", Call: "connect", Sock: "@" + abstract}, unix.EPERM, ok},
		{P{Name: "connect inet", Call: "connect", Family: "inet"}, unix.EAFNOSUPPORT, unix.ECONNREFUSED},
		{P{Name: "connect addrlen too large", Call: "connect", Sock: "$BASE/w/s.sock", AddrLen: 200}, unix.EINVAL, unix.EINVAL},
		{P{Name: "connect missing", Call: "connect", Sock: "$BASE/w/nope.sock"}, unix.ENOENT, unix.ENOENT},
		{P{Name: "connect non-socket", Call: "connect", Sock: "$BASE/w/f"}, unix.ECONNREFUSED, unix.ECONNREFUSED},
	}
}

func opsOf(cases []tcase) []probeOp {
	ops := make([]probeOp, len(cases))
	for i, c := range cases {
		ops[i] = c.op
	}
	return ops
}

// applicable adapts the rows to the kernel and drops those the fixture's
// file system cannot run, saying why. A call this kernel does not have
// (fchmodat2 before Linux 6.6, setxattrat and removexattrat before 6.13)
// fails with ENOSYS unconfined, so confined it must too: the supervisor
// must not perform for the task a call the kernel would have refused.
// Rows naming a user.* xattr are dropped where the file system has none
// (the escape suite's xattr rows say "not applicable" there too).
func (fx *fixture) applicable(t testing.TB, cases []tcase) []tcase {
	t.Helper()
	out := cases[:0:0]
	var xattrs int
	missing := map[string]int{}
	for _, c := range cases {
		switch {
		case kernelLacks(c.op.Call):
			missing[c.op.Call]++
			c.confined, c.control = unix.ENOSYS, unix.ENOSYS
			out = append(out, c)
		case fx.noUserXattr && strings.HasPrefix(c.op.XName, "user."):
			xattrs++
		default:
			out = append(out, c)
		}
	}
	if xattrs > 0 {
		t.Logf("skipping %d rows naming a user.* xattr: the test's file system (%s) has no user xattrs (tmpfs before Linux 6.6)", xattrs, sharedDir)
	}
	for call, n := range missing {
		t.Logf("%d %s rows want ENOSYS confined and unconfined: this kernel has no %s", n, call, call)
	}
	return out
}

// kernelLacks says whether the kernel has no such call: it answers
// ENOSYS to arguments that a kernel with the call fails otherwise (a flag
// no kernel accepts, a descriptor of -1), without changing anything.
func kernelLacks(call string) bool {
	dot := []byte(".\x00")
	var e unix.Errno
	switch call {
	case "fchmodat2":
		_, _, e = unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(cwdFD), uintptr(unsafe.Pointer(&dot[0])), 0o755, 0x40000, 0, 0)
	case "setxattrat":
		_, _, e = unix.Syscall6(unix.SYS_SETXATTRAT, ^uintptr(0), uintptr(unsafe.Pointer(&dot[0])), 0, 0, 0, 0)
	case "removexattrat":
		_, _, e = unix.Syscall6(unix.SYS_REMOVEXATTRAT, ^uintptr(0), uintptr(unsafe.Pointer(&dot[0])), 0, 0, 0, 0)
	}
	return e == unix.ENOSYS
}

// securityXattrRow is the row whose control depends on the kernel: the
// capability check that keeps a process without CAP_SYS_ADMIN from
// setting security.* runs only when no LSM answers the setxattr hook
// first, and on Debian's 6.1 (the BPF LSM in lsm=) one does, so the
// unconfined call succeeds there. The supervisor refuses it either way.
const securityXattrRow = "setxattr security"

// hostControls adjusts cases to what ctlRes shows this kernel does for
// securityXattrRow, saying so, and returns the xattr names the trees'
// comparison must then leave out (the confined run was refused what the
// control did).
func hostControls(t testing.TB, cases []tcase, ctlRes []probeResult) []string {
	t.Helper()
	for i, c := range cases {
		if c.op.Name == securityXattrRow && i < len(ctlRes) && ctlRes[i].Errno == 0 && c.control == unix.EPERM {
			t.Logf("%q: this kernel lets a process without CAP_SYS_ADMIN set %s unconfined (an LSM answers the hook before the capability check); its control expects OK here, the confined run must still be refused", c.op.Name, c.op.XName)
			cases[i].control = ok
			return []string{c.op.XName}
		}
	}
	return nil
}

// forArch drops the rows whose call this architecture lacks, saying why
// (archAbsent), and logs once which rows run as another call (nativeCall).
func forArch(t testing.TB, cases []tcase) []tcase {
	t.Helper()
	out := cases[:0:0]
	skipped := map[string]int{}
	as := map[string]string{}
	for _, c := range cases {
		if _, absent := archAbsent[c.op.Call]; absent {
			skipped[c.op.Call]++
			continue
		}
		if n := nativeCall(c.op.Call); n != c.op.Call {
			as[c.op.Call] = n
		}
		out = append(out, c)
	}
	for _, call := range slices.Sorted(maps.Keys(skipped)) {
		t.Logf("skipping %d %s rows: %s", skipped[call], call, archAbsent[call])
	}
	for _, call := range slices.Sorted(maps.Keys(as)) {
		t.Logf("%s rows run as %s (%s has no %s)", call, as[call], runtime.GOARCH, call)
	}
	return out
}

func checkResults(t *testing.T, what string, cases []tcase, res []probeResult, confined bool) {
	t.Helper()
	if len(res) != len(cases) {
		t.Fatalf("%s: %d results for %d cases", what, len(res), len(cases))
	}
	for i, c := range cases {
		want := c.control
		if confined {
			want = c.confined
		}
		if got := unix.Errno(res[i].Errno); got != want {
			t.Errorf("%s %q: got %s, want %s", what, c.op.Name, errName(got), errName(want))
		}
	}
}

// TestPolicy runs every handled call against targets inside and outside the
// writable root, confined and, as a control, unconfined, as root and as an
// unprivileged uid.
//
// The "nogetfd" variants run the supervisor as where pidfd_getfd is refused
// (Docker's default profile): it reaches the task's descriptors through
// /proc/<tid>/fd and connects fresh sockets (connect_fallback.go).
func TestPolicy(t *testing.T) {
	needRoot(t)
	for _, run := range []struct {
		uid     int
		noGetfd bool
	}{{0, false}, {65534, false}, {0, true}, {65534, true}} {
		uid := run.uid
		name := fmt.Sprintf("uid%d", uid)
		if run.noGetfd {
			name += "-nogetfd"
		}
		t.Run(name, func(t *testing.T) {
			ctl := newFixture(t, uid)
			cases := ctl.applicable(t, forArch(t, policyCases(uid, ctl.abstract)))
			ctlRes := runProbe(t, ctl, opsOf(cases), runOpts{dropCaps: true})
			skipXattrs := hostControls(t, cases, ctlRes)
			checkResults(t, "control", cases, ctlRes, false)

			fx := newFixture(t, uid)
			cases = fx.applicable(t, forArch(t, policyCases(uid, fx.abstract)))
			outBefore := snapshot(t, fx.out)
			baseBefore := lstatDesc(t, fx.base)
			stats := &Stats{}
			forceNoGetfd.Store(run.noGetfd)
			res := runProbe(t, fx, opsOf(cases), runOpts{confined: true, dropCaps: true, cfg: fx.config(stats)})
			forceNoGetfd.Store(false)
			checkResults(t, "confined", cases, res, true)

			// Nothing outside the writable root changed.
			if after := snapshot(t, fx.out); !mapsEqual(outBefore, after) {
				t.Errorf("outside tree changed:\nbefore %v\nafter  %v", outBefore, after)
			}
			if after := lstatDesc(t, fx.base); after != baseBefore {
				t.Errorf("parent of the root changed: %s -> %s", baseBefore, after)
			}
			// Inside, the confined run had exactly the effects of the
			// unconfined one (modes incl. the stripped S_ISGID, owners,
			// xattrs, explicit times).
			cmpTrees(t, ctl.w, fx.w, skipXattrs...)
			var st unix.Stat_t
			if err := unix.Stat(filepath.Join(fx.w, "f2"), &st); err != nil || st.Mtim != explicitTime[1] {
				t.Errorf("explicit utimensat: mtime %v, want %v (%v)", st.Mtim, explicitTime[1], err)
			}
			wantG := uint32(0o2755)
			if uid != 0 {
				wantG = 0o755
			}
			if err := unix.Stat(filepath.Join(fx.w, "gd"), &st); err != nil || st.Mode&0o7777 != wantG {
				t.Errorf("w/gd mode %o, want %o", st.Mode&0o7777, wantG)
			}

			// Sockets: the inside listener saw the probe's own
			// credentials (not root's), the outside one nothing.
			for _, r := range res {
				if strings.HasPrefix(r.Name, "connect inside") || r.Name == "connect allowlisted" {
					if r.Byte != "x" {
						t.Errorf("%s: no byte exchanged", r.Name)
					}
				}
			}
			peers := fx.peers("w/s.sock")
			if len(peers) != 2 {
				t.Errorf("inside listener: %d connections, want 2", len(peers))
			}
			for _, p := range peers {
				if int(p.Uid) != uid || int(p.Gid) != uid {
					t.Errorf("inside listener saw peer uid=%d gid=%d, want %d", p.Uid, p.Gid, uid)
				}
			}
			if n := len(fx.peers("out/s.sock")); n != 0 {
				t.Errorf("outside listener got %d connections", n)
			}
			if n := len(fx.peers("@" + fx.abstract)); n != 0 {
				t.Errorf("abstract listener got %d connections", n)
			}
			if n := len(fx.peers("out/allowed.sock")); n != 1 {
				t.Errorf("allowlisted listener got %d connections, want 1", n)
			}

			// Stats explain the refusals.
			counts := stats.Counts()
			if c := counts[nativeCall("chmod")]; c.Denied == 0 || c.Allowed == 0 || c.Failed == 0 {
				t.Errorf("chmod counts %+v", c)
			}
			if c := counts["connect"]; c.Denied != 4 {
				t.Errorf("connect counts %+v, want 4 denied", c)
			}
			found := false
			for _, d := range stats.Denials() {
				if d.Syscall == nativeCall("chmod") && d.Path == filepath.Join(fx.out, "f") && d.Errno == syscall.EACCES && d.Reason != "" {
					found = true
				}
			}
			if !found {
				t.Errorf("no chmod denial recorded for out/f: %+v", stats.Denials())
			}
		})
	}
}

func lstatDesc(t *testing.T, p string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%v", st.Mode, st.Uid, st.Gid, st.Mtim)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// cmpTrees compares mode, owner and xattrs (but skipXattrs) of the files
// under two trees.
func cmpTrees(t *testing.T, a, b string, skipXattrs ...string) {
	t.Helper()
	strip := func(root string, m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			rel, _ := filepath.Rel(root, k)
			// Drop times: "now" differs between the runs.
			var kept []string
			for _, f := range strings.Fields(v) {
				skip := strings.HasPrefix(f, "mtime=") || strings.HasPrefix(f, "atime=")
				for _, x := range skipXattrs {
					skip = skip || strings.HasPrefix(f, x+"=")
				}
				if !skip {
					kept = append(kept, f)
				}
			}
			out[rel] = strings.Join(kept, " ")
		}
		return out
	}
	sa, sb := strip(a, snapshot(t, a)), strip(b, snapshot(t, b))
	for k, v := range sa {
		if sb[k] != v {
			t.Errorf("%s: control %q, confined %q", k, v, sb[k])
		}
	}
	if len(sa) != len(sb) {
		t.Errorf("trees differ in size: %d vs %d", len(sa), len(sb))
	}
}

// TestRootCapsGrantNothing runs a probe as root with its capabilities: the
// kernel lets it chown to anyone, the supervisor (root itself) must not.
func TestRootCapsGrantNothing(t *testing.T) {
	needRoot(t)
	type P = probeOp
	cases := []tcase{
		{P{Name: "chown to another uid", Call: "chown", Path: "w/f", Owner: "12345"}, unix.EPERM, ok},
		{P{Name: "chgrp to a foreign group", Call: "chown", Path: "w/f2", Group: "12345"}, unix.EPERM, ok},
		{P{Name: "fchown to another uid", Call: "fchown", FD: "w/f2", Owner: "12346"}, unix.EPERM, ok},
		{P{Name: "setxattr trusted", Call: "setxattr", Path: "w/f", XName: "trusted.t", XValue: "v"}, unix.EPERM, ok},
		{P{Name: "chmod outside", Call: "chmod", Path: "out/f", Mode: 0o600}, unix.EACCES, ok},
	}
	ctl := newFixture(t, 0)
	checkResults(t, "control", cases, runProbe(t, ctl, opsOf(cases), runOpts{}), false)
	fx := newFixture(t, 0)
	checkResults(t, "confined", cases, runProbe(t, fx, opsOf(cases), runOpts{confined: true, cfg: fx.config(nil)}), true)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(fx.w, "f"), &st); err != nil || st.Uid != 0 {
		t.Errorf("w/f owner %d (%v)", st.Uid, err)
	}
}

// raceIter is how often each race repeats its call: 2000, or
// NOTIFY_TEST_RACE_ITER where every notified call is slow (the arm64 guest,
// emulated by qemu TCG, runs 200), saying so.
func raceIter(t testing.TB) int {
	t.Helper()
	s := os.Getenv("NOTIFY_TEST_RACE_ITER")
	if s == "" {
		return 2000
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 4 {
		t.Fatalf("NOTIFY_TEST_RACE_ITER=%q: want a count of at least 4", s)
	}
	t.Logf("races of %d calls each (NOTIFY_TEST_RACE_ITER), not 2000", n)
	return n
}

// TestRaces attacks the check/use window: the path in memory, a symlink, the
// descriptor and the socket address are swapped between an inside and an
// outside target while the call is repeated. The outside target must never
// be affected.
func TestRaces(t *testing.T) {
	needRoot(t)
	for _, uid := range []int{0, 65534} {
		t.Run(fmt.Sprintf("uid%d", uid), func(t *testing.T) {
			fx := newFixture(t, uid)
			iter := raceIter(t)
			ops := []probeOp{
				{Name: "memflip", Call: "race-memflip", Path: "w/f", Alt: "out/f", Mode: 0o600, Iter: iter},
				{Name: "symlink", Call: "race-symlink", Path: "$BASE/w/f", Alt: "$BASE/out/f", Mode: 0o600, Iter: iter},
				{Name: "fdswap", Call: "race-fdswap", Path: "$BASE/w/f", Alt: "$BASE/out/f", Mode: 0o600, Iter: iter},
				{Name: "connect", Call: "race-connect", Path: "$BASE/w/s.sock", Alt: "$BASE/out/s.sock", Iter: iter / 4},
			}
			before := snapshot(t, fx.out)
			res := runProbe(t, fx, ops, runOpts{confined: true, cfg: fx.config(nil)})
			for i, r := range res {
				t.Logf("%s: %s", r.Name, r.Err)
				if r.OK+r.Fail != ops[i].Iter {
					t.Errorf("%s: %d calls, want %d", r.Name, r.OK+r.Fail, ops[i].Iter)
				}
			}
			if after := snapshot(t, fx.out); !mapsEqual(before, after) {
				t.Errorf("outside tree changed:\nbefore %v\nafter  %v", before, after)
			}
			if n := len(fx.peers("out/s.sock")); n != 0 {
				t.Errorf("outside listener got %d connections", n)
			}
		})
	}
}

// TestServeCancel checks that Serve stops on cancellation while the
// confined task lives on, and that the task's notified calls then fail
// (ENOSYS) instead of hanging once the listener is closed. The probe
// marks when its first call was served and waits for the test's go
// before the next: no step depends on how fast either side runs.
func TestServeCancel(t *testing.T) {
	needRoot(t)
	fx := newFixture(t, 65534)
	ops := []probeOp{
		{Name: "before", Call: "chmod", Path: "w/f", Mode: 0o600},
		{Name: "ready", Call: "mark", Path: "w/ready"},
		{Name: "go", Call: "await", Path: "w/go"},
		{Name: "after", Call: "chmod", Path: "w/f", Mode: 0o640},
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, lfd, wait := startConfined(t, fx, ops)
	errc := make(chan error, 1)
	go func() { errc <- Serve(ctx, lfd, fx.config(nil)) }()
	if !testutil.Await(func() bool { _, err := os.Stat(filepath.Join(fx.w, "ready")); return err == nil }) {
		t.Fatal("the probe never reached its mark")
	}
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Serve returned %v, want context.Canceled", err)
		}
	case <-time.After(probeHang):
		t.Fatal("Serve did not return after cancel")
	}
	unix.Close(lfd)
	if err := os.WriteFile(filepath.Join(fx.w, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := wait()
	if len(res) != 4 || res[0].Errno != 0 || res[1].Errno != 0 || res[2].Errno != 0 || unix.Errno(res[3].Errno) != unix.ENOSYS {
		t.Errorf("results %+v; want OK, OK, OK, ENOSYS", res)
	}
}

// startConfined starts a confined probe and returns the listener; wait reaps
// the probe and returns its results.
func startConfined(t testing.TB, fx *fixture, ops []probeOp) (*exec.Cmd, int, func() []probeResult) {
	t.Helper()
	js := mustJSON(t, ops)
	cmd := exec.Command(testBin)
	cmd.Dir = fx.base
	cmd.Env = append(os.Environ(), envOps+"="+js, envBase+"="+fx.base, envMode+"=install")
	if fx.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(fx.uid), Gid: uint32(fx.uid)}}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	parent, child := socketpair(t)
	cmd.ExtraFiles = []*os.File{child}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	child.Close()
	lfd := recvFD(t, parent)
	parent.Close()
	return cmd, lfd, func() []probeResult {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("probe: %v\n%s", err, stderr.String())
		}
		return mustUnmarshal(t, stdout.String())
	}
}

// TestNoDescriptorLeak runs many allowed, denied and failing calls and
// checks the supervisor process ends with the descriptors it started with.
func TestNoDescriptorLeak(t *testing.T) {
	needRoot(t)
	fx := newFixture(t, 65534)
	cases := fx.applicable(t, forArch(t, policyCases(65534, fx.abstract)))
	// Warm up whatever the runtime opens lazily.
	runProbe(t, fx, opsOf(cases[:1]), runOpts{confined: true, cfg: fx.config(nil)})
	before := countFDs(t)
	runProbe(t, fx, opsOf(cases), runOpts{confined: true, cfg: fx.config(nil)})
	// The fixture's listeners close their connections once the probe is
	// gone (EOF): wait for that, then count.
	fx.quiet()
	if after := countFDs(t); after != before {
		t.Fatalf("descriptors: %d before, %d after", before, after)
	}
}

func TestSyscalls(t *testing.T) {
	names := Syscalls()
	if !slices.IsSorted(names) {
		t.Errorf("not sorted: %v", names)
	}
	want := []string{"chmod", "chown", "connect", "fchmod", "fchmodat", "fchmodat2", "fchown", "fchownat",
		"fremovexattr", "fsetxattr", "futimesat", "lchown", "lremovexattr", "lsetxattr", "removexattr",
		"removexattrat", "setxattr", "setxattrat", "utime", "utimensat", "utimes",
		// proc_targets.go
		"fcntl", "ioprio_set", "kill", "migrate_pages", "move_pages", "pidfd_send_signal", "prlimit64",
		"rt_sigqueueinfo", "rt_tgsigqueueinfo", "sched_setaffinity", "sched_setattr", "sched_setparam",
		"sched_setscheduler", "setpriority", "tgkill", "tkill",
		// files.go
		"link", "linkat", "rename", "renameat", "renameat2", "truncate",
		// (create.go's are CreateSyscalls)

		// fork.go
		"clone", "fork", "vfork",
		// sigaction.go
		"rt_sigaction",
		// inet.go
		"socket"}
	want = slices.DeleteFunc(want, func(n string) bool { return slices.Contains(archLacks, n) })
	slices.Sort(want)
	if nativeArch == unix.AUDIT_ARCH_X86_64 && !slices.Equal(names, want) {
		t.Errorf("Syscalls() = %v\nwant %v", names, want)
	}
}

func TestPolicyPaths(t *testing.T) {
	p, err := newPolicy(Config{Plan: &plan.Plan{Backend: plan.BackendCore, WritableRoots: []string{"/w", "/a/b/"}, SocketAllow: []string{"/run/x.sock"}}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]bool{
		"/w": true, "/w/x": true, "/w/x/y": true, "/a/b": true, "/a/b/c": true,
		"/w2": false, "/w2/x": false, "/a": false, "/a/bc": false, "/": false,
		"socket:[123]": false, "": false, "anon_inode:[x]": false, "w/x": false,
	} {
		if got := p.writable(path); got != want {
			t.Errorf("writable(%q) = %v", path, got)
		}
	}
	if !p.socketAllowed("/run/x.sock") || p.socketAllowed("/run/y.sock") || !p.socketAllowed("/w/s") {
		t.Error("socketAllowed")
	}
	if _, err := newPolicy(Config{Plan: &plan.Plan{WritableRoots: []string{"rel"}}}); err == nil {
		t.Error("relative root accepted")
	}
	if _, err := newPolicy(Config{Plan: &plan.Plan{SocketAllow: []string{"rel.sock"}}}); err == nil {
		t.Error("relative socket accepted")
	}
	// The persistence guard: nothing inside a guarded path is writable;
	// where Landlock grants the entries on the way one by one (the core),
	// the supervisor adds, removes or replaces no guarded entry nor one on
	// the way to it there, in any letter case, and every other entry.
	for _, fixed := range []bool{false, true} {
		backend := plan.BackendNamespaces
		if fixed {
			backend = plan.BackendCore
		}
		g, err := newPolicy(Config{Plan: &plan.Plan{Backend: backend, WritableRoots: []string{"/w"}, Guarded: []string{"/w/sub/.git"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			dir, entry string
			writable   bool // g.writable(dir)
			entryOK    bool // g.entryWritable(dir, entry)
		}{
			{"/w/sub/.git", "config", false, false},
			{"/w/sub/.git/hooks", "x", false, false},
			{"/w/sub/.gitx", "x", true, true},
			{"/w/sub", ".git", true, !fixed},
			{"/w/sub", ".GIT/", true, !fixed},
			{"/w/sub", "new", true, true},
			{"/w/sub", "..", true, !fixed},
			{"/w", "sub", true, !fixed},
			{"/w", "build", true, true},
			{"/w/other", "x", true, true},
			{"/x", "y", false, false},
		} {
			if got := [2]bool{g.writable(c.dir), g.entryWritable(c.dir, c.entry)}; got != [2]bool{c.writable, c.entryOK} {
				t.Errorf("fixed %v: %s, %s: writable, entryWritable = %v, want %v", fixed, c.dir, c.entry, got, [2]bool{c.writable, c.entryOK})
			}
		}
		if !g.socketAllowed("/w/sub/.git/fsmonitor--daemon.ipc") {
			t.Error("a socket in a guarded path is not reachable")
		}
	}
	if _, err := newPolicy(Config{Plan: &plan.Plan{Guarded: []string{"rel"}}}); err == nil {
		t.Error("relative guarded path accepted")
	}
	all, _ := newPolicy(Config{Plan: &plan.Plan{WritableRoots: []string{"/"}}})
	if !all.writable("/anything") || all.writable("pipe:[1]") {
		t.Error("root /")
	}
}

func TestProcSelfFD(t *testing.T) {
	for p, want := range map[string]int32{
		"/proc/self/fd/3": 3, "/proc/thread-self/fd/12": 12, "/proc/self/fd/0": 0, "/dev/fd/7": 7,
		"/proc/self/fd/": -1, "/proc/self/fd/03": -1, "/proc/self/fd/3/x": -1, "/proc/1/fd/3": -1,
		"/proc/self/fd/-1": -1, "/proc/self/fd/99999999999": -1,
	} {
		n, ok := procSelfFD(p)
		if (want >= 0) != ok || ok && n != want {
			t.Errorf("procSelfFD(%q) = %d, %v", p, n, ok)
		}
	}
}

// TestThreadCreds switches a locked thread to another uid, gid and groups and
// back, and checks a uid-0 task gets no effective capabilities.
func TestThreadCreds(t *testing.T) {
	needRoot(t)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread is never unlocked: it dies with the goroutine.
		runtime.LockOSThread()
		tc, err := newThreadCreds()
		if err != nil {
			t.Error(err)
			return
		}
		if !tc.canSwitch {
			t.Error("root cannot switch credentials")
			return
		}
		for _, c := range []creds{
			{euid: 65534, fsuid: 65534, egid: 65534, fsgid: 65534, groups: []uint32{65534, 100}},
			{euid: 0, fsuid: 0, egid: 0, fsgid: 0, groups: []uint32{}},
			{euid: 1000, fsuid: 1000, egid: 1001, fsgid: 1002, groups: nil},
		} {
			if err := tc.become(&c); err != nil {
				t.Errorf("become %+v: %v", c, err)
			}
			_, e, _ := getresuid()
			_, g, _ := getresgid()
			groups, _ := getgroups()
			var caps [2]unix.CapUserData
			_ = capget(&caps)
			if e != c.euid || g != c.egid || getfsuid() != c.fsuid || getfsgid() != c.fsgid || !sameGroups(groups, c.groups) {
				t.Errorf("became euid=%d egid=%d fsuid=%d fsgid=%d groups=%v, want %+v", e, g, getfsuid(), getfsgid(), groups, c)
			}
			if caps[0].Effective != 0 || caps[1].Effective != 0 {
				t.Errorf("effective capabilities %x %x while acting for %+v", caps[0].Effective, caps[1].Effective, c)
			}
			// The process's other threads are unaffected.
			if st, err := os.ReadFile("/proc/self/status"); err != nil || !strings.Contains(string(st), "Uid:\t0\t0\t0\t0") {
				t.Errorf("main thread credentials changed: %v", err)
			}
			tc.restore()
			if tc.poisoned {
				t.Errorf("restore failed after %+v", c)
				return
			}
		}
	}()
	<-done
}

func TestServeBadConfig(t *testing.T) {
	if err := Serve(context.Background(), -1, Config{Plan: &plan.Plan{WritableRoots: []string{"relative"}}}); err == nil {
		t.Error("Serve accepted a relative writable root")
	}
	if err := Serve(context.Background(), -1, Config{}); err == nil {
		t.Error("Serve accepted a config without a plan")
	}
}

// BenchmarkNotifiedChmod measures a chmod that goes through the supervisor
// (the probe's call, two context switches and the supervisor's work).
func BenchmarkNotifiedChmod(b *testing.B) {
	needRoot(b)
	fx := newFixture(b, 65534)
	ops := []probeOp{{Name: "chmod", Call: "race-memflip", Path: "w/f", Alt: "w/f", Mode: 0o600, Iter: b.N}}
	b.ResetTimer()
	res := runProbe(b, fx, ops, runOpts{confined: true, cfg: fx.config(nil)})
	if res[0].OK != b.N {
		b.Fatalf("%s", res[0].Err)
	}
}

// TestAllowAbstract: with AllowAbstract the supervisor connects abstract
// sockets, as the task (SO_PEERCRED shows its uid).
func TestAllowAbstract(t *testing.T) {
	needRoot(t)
	fx := newFixture(t, 65534)
	cfg := fx.config(nil)
	cfg.AllowAbstract = true
	ops := []probeOp{{Name: "abstract", Call: "connect", Sock: "@" + fx.abstract}}
	res := runProbe(t, fx, ops, runOpts{confined: true, cfg: cfg})
	if res[0].Errno != 0 || res[0].Byte != "x" {
		t.Fatalf("abstract connect: %+v", res[0])
	}
	peers := fx.peers("@" + fx.abstract)
	if len(peers) != 1 || peers[0].Uid != 65534 {
		t.Errorf("peers %+v", peers)
	}
}

// TestNewerCallsFollowKernel: a call the kernel lacks is answered as the
// kernel (or a container's profile) answers it, never performed by the
// supervisor for the task. This kernel has them all, so the probe's
// answer is faked; the 6.1 guests run the real case (applicable).
func TestNewerCallsFollowKernel(t *testing.T) {
	needRoot(t)
	saved := refusedByKernel
	refusedByKernel = func() map[sysKind]unix.Errno {
		return map[sysKind]unix.Errno{sysFchmodat2: unix.ENOSYS, sysSetxattrat: unix.EPERM}
	}
	defer func() { refusedByKernel = saved }()
	fx := newFixture(t, 0)
	type P = probeOp
	cases := []tcase{
		{P{Name: "fchmodat2 the kernel lacks", Call: "fchmodat2", Path: "w/f", Mode: 0o600}, unix.ENOSYS, ok},
		{P{Name: "setxattrat a profile refuses", Call: "setxattrat", Dir: "w", Path: "f", XName: "user.at", XValue: "a"}, unix.EPERM, ok},
		{P{Name: "fchmodat still performed", Call: "fchmodat", Path: "w/f", Mode: 0o640}, ok, ok},
	}
	res := runProbe(t, fx, opsOf(cases), runOpts{confined: true, dropCaps: true, cfg: fx.config(&Stats{})})
	checkResults(t, "confined", cases, res, true)
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(fx.w, "f"), &st); err != nil || st.Mode&0o7777 != 0o640 {
		t.Errorf("w/f mode %o (%v), want 0640: fchmodat2 must not have run, fchmodat must", st.Mode&0o7777, err)
	}
}
