//go:build linux

package seccomp

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// fileCase is a row of the file rules' tables: a call, its arguments, and
// the filter's return under the test's configuration (want) and with the old-ABI
// flags NotifyTruncate and NotifyRename too (old).
type fileCase struct {
	name string
	sys  string
	args []uint64
	want uint32
	old  uint32
}

// runFileCases runs cases on both arches under cfg, with the old-ABI
// flags off and on. A call an arch lacks is passed over (arm64 has only
// the *at forms).
func runFileCases(t *testing.T, cfg plan.Seccomp, cases []fileCase) {
	t.Helper()
	for _, arch := range arches {
		_, table, _ := archInfo(arch)
		for _, old := range []bool{false, true} {
			conf := cfg
			conf.Arch, conf.NotifyTruncate, conf.NotifyRename = arch, old, old
			v := newVM(t, conf)
			for _, c := range cases {
				nr, ok := table[c.sys]
				if !ok {
					continue
				}
				want := c.want
				if old {
					want = c.old
				}
				if got := v.run(t, nr, c.args...); got != want {
					t.Errorf("%v old-ABI %v: %s %s(%#x) = %s, want %s", arch, old, c.name, c.sys, c.args, retName(got), retName(want))
				}
			}
		}
	}
}

// TestFileRules walks the file-creation, truncation and rename rules on
// both arches, with the old-ABI flags off and on.
func TestFileRules(t *testing.T) {
	const (
		setuid  = unix.S_ISUID | 0o755
		setgid  = unix.S_ISGID | 0o755
		tmpfile = oTmpfile | unix.O_RDWR
	)
	cases := []fileCase{
		{"plain read", "openat", []uint64{0, 0, unix.O_RDONLY, 0}, allow, allow},
		{"create 0644", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat | unix.O_TRUNC, 0o644}, allow, allow},
		{"create setuid", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, setuid}, eperm, eperm},
		{"create setgid", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, setgid}, eperm, eperm},
		{"create setuid high mode word", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, setuid | hi}, eperm, eperm},
		{"create, mode high word only", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, 0o644 | hi*unix.S_ISUID}, allow, allow},
		{"create flag in high word", "openat", []uint64{0, 0, unix.O_WRONLY | hi*oCreat, setuid}, allow, allow},
		{"tmpfile setuid", "openat", []uint64{0, 0, tmpfile, setuid}, eperm, eperm},
		{"no create: mode ignored", "openat", []uint64{0, 0, unix.O_RDONLY, setuid}, allow, allow},
		{"rdonly trunc", "openat", []uint64{0, 0, unix.O_RDONLY | unix.O_TRUNC, 0}, allow, eacces},
		{"accmode 3 trunc", "openat", []uint64{0, 0, 3 | unix.O_TRUNC, 0}, allow, eacces},
		{"rdonly creat trunc", "openat", []uint64{0, 0, unix.O_RDONLY | oCreat | unix.O_TRUNC, 0o644}, allow, eacces},
		{"wronly trunc", "openat", []uint64{0, 0, unix.O_WRONLY | unix.O_TRUNC, 0}, allow, allow},
		{"rdwr trunc", "openat", []uint64{0, 0, unix.O_RDWR | unix.O_TRUNC | unix.O_CLOEXEC, 0}, allow, allow},
		{"rdonly trunc in high word", "openat", []uint64{0, 0, unix.O_RDONLY | hi*unix.O_TRUNC, 0}, allow, allow},
		{"open create setuid", "open", []uint64{0, unix.O_WRONLY | oCreat, setuid}, eperm, eperm},
		{"open rdonly trunc", "open", []uint64{0, unix.O_RDONLY | unix.O_TRUNC}, allow, eacces},
		{"creat setuid", "creat", []uint64{0, setuid}, eperm, eperm},
		{"creat 0755", "creat", []uint64{0, 0o755}, allow, allow},
		{"mknod reg setuid", "mknod", []uint64{0, unix.S_IFREG | setuid, 0}, eperm, eperm},
		{"mknod fifo", "mknod", []uint64{0, unix.S_IFIFO | 0o644, 0}, allow, allow},
		{"mknodat reg setgid", "mknodat", []uint64{0, 0, unix.S_IFREG | setgid, 0}, eperm, eperm},
		{"mknodat reg", "mknodat", []uint64{0, 0, unix.S_IFREG | 0o644, 0}, allow, allow},
		{"openat2", "openat2", []uint64{0, 0, 0, 24}, enosys, enosys},
		{"truncate", "truncate", []uint64{0, 0}, allow, notif},
		{"rename", "rename", []uint64{0, 0}, allow, notif},
		{"renameat", "renameat", []uint64{0, 0, 0, 0}, allow, notif},
		{"renameat2", "renameat2", []uint64{0, 0, 0, 0, 0}, allow, notif},
		{"link", "link", []uint64{0, 0}, allow, notif},
		{"linkat", "linkat", []uint64{0, 0, 0, 0, 0}, allow, notif},
	}
	runFileCases(t, plan.Seccomp{NotifyMetadata: true, NotifyConnect: true}, cases)
}

// TestCreateRules walks NotifyCreate (the persistence guard's refusal of a
// new .git): every call that adds a name reaches the supervisor once the
// mode and truncation checks passed, with the old-ABI flags off and on.
func TestCreateRules(t *testing.T) {
	const setuid = unix.S_ISUID | 0o644
	// want: NotifyCreate alone; old: with NotifyTruncate and NotifyRename too.
	cases := []fileCase{
		{"read", "openat", []uint64{0, 0, unix.O_RDONLY, 0}, allow, allow},
		{"write no create", "openat", []uint64{0, 0, unix.O_WRONLY | unix.O_TRUNC, 0}, allow, allow},
		{"create", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat | unix.O_TRUNC, 0o644}, notif, notif},
		{"create excl", "openat", []uint64{0, 0, unix.O_RDWR | oCreat | unix.O_EXCL, 0o600}, notif, notif},
		{"create rdonly", "openat", []uint64{0, 0, unix.O_RDONLY | oCreat, 0o644}, notif, notif},
		{"create rdonly trunc", "openat", []uint64{0, 0, unix.O_RDONLY | oCreat | unix.O_TRUNC, 0o644}, notif, eacces},
		{"create setuid", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, setuid}, eperm, eperm},
		{"tmpfile", "openat", []uint64{0, 0, oTmpfile | unix.O_RDWR, 0o600}, allow, allow},
		{"create flag in high word", "openat", []uint64{0, 0, unix.O_WRONLY | hi*oCreat, 0o644}, allow, allow},
		{"open create", "open", []uint64{0, unix.O_WRONLY | oCreat, 0o644}, notif, notif},
		{"open read", "open", []uint64{0, unix.O_RDONLY, 0}, allow, allow},
		{"creat", "creat", []uint64{0, 0o644}, notif, notif},
		{"creat setuid", "creat", []uint64{0, setuid}, eperm, eperm},
		{"mknod fifo", "mknod", []uint64{0, unix.S_IFIFO | 0o644, 0}, notif, notif},
		{"mknodat reg setgid", "mknodat", []uint64{0, 0, unix.S_IFREG | unix.S_ISGID | 0o644, 0}, eperm, eperm},
		{"mknodat reg", "mknodat", []uint64{0, 0, unix.S_IFREG | 0o644, 0}, notif, notif},
		{"mkdir", "mkdir", []uint64{0, 0o755}, notif, notif},
		{"mkdirat", "mkdirat", []uint64{0, 0, 0o755}, notif, notif},
		{"symlink", "symlink", []uint64{0, 0}, notif, notif},
		{"symlinkat", "symlinkat", []uint64{0, 0, 0}, notif, notif},
		{"rename", "rename", []uint64{0, 0}, notif, notif},
		{"renameat2", "renameat2", []uint64{0, 0, 0, 0, 0}, notif, notif},
		{"link", "link", []uint64{0, 0}, notif, notif},
		{"linkat", "linkat", []uint64{0, 0, 0, 0, 0}, notif, notif},
		{"truncate", "truncate", []uint64{0, 0}, allow, notif},
		{"openat2", "openat2", []uint64{0, 0, 0, 24}, enosys, enosys},
		// The supervisor keeps a task's groups between its calls.
		{"setgroups", "setgroups", []uint64{0, 0}, notif, notif},
	}
	runFileCases(t, plan.Seccomp{NotifyMetadata: true, NotifyConnect: true, NotifyCreate: true}, cases)
}

// TestGuardTreeRules walks NotifyGuardTree (the core's guarded work
// tree): opens for writing or with O_TRUNC, truncate and the removals
// reach the supervisor besides what NotifyCreate sends; reads do not.
func TestGuardTreeRules(t *testing.T) {
	const setuid = unix.S_ISUID | 0o644
	// want: NotifyCreate and NotifyGuardTree; old: with NotifyTruncate and NotifyRename too.
	cases := []fileCase{
		{"read", "openat", []uint64{0, 0, unix.O_RDONLY | unix.O_DIRECTORY, 0}, allow, allow},
		{"write", "openat", []uint64{0, 0, unix.O_WRONLY, 0}, notif, notif},
		{"read write", "openat", []uint64{0, 0, unix.O_RDWR | unix.O_APPEND, 0}, notif, notif},
		{"access mode 3", "openat", []uint64{0, 0, 3, 0}, notif, notif},
		{"write trunc", "open", []uint64{0, unix.O_WRONLY | unix.O_TRUNC, 0}, notif, notif},
		{"read trunc", "openat", []uint64{0, 0, unix.O_RDONLY | unix.O_TRUNC, 0}, notif, eacces},
		{"create", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, 0o644}, notif, notif},
		{"create setuid", "openat", []uint64{0, 0, unix.O_WRONLY | oCreat, setuid}, eperm, eperm},
		{"write flag in high word", "openat", []uint64{0, 0, hi * unix.O_WRONLY, 0}, allow, allow},
		{"truncate", "truncate", []uint64{0, 0}, notif, notif},
		{"unlink", "unlink", []uint64{0}, notif, notif},
		{"rmdir", "rmdir", []uint64{0}, notif, notif},
		{"unlinkat", "unlinkat", []uint64{0, 0, 0}, notif, notif},
	}
	runFileCases(t, plan.Seccomp{NotifyMetadata: true, NotifyConnect: true, NotifyCreate: true, NotifyGuardTree: true}, cases)
}
