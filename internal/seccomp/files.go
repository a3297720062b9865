//go:build linux

package seccomp

import (
	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// Rules on how files are created, truncated, renamed and linked: what
// Landlock does not govern at all (the mode of a new file) or not on old
// ABIs (truncation before ABI 3, reparenting before ABI 2).

// Open flags and mode bits the blocks test. They are the same on amd64 and
// arm64 (unix.O_TMPFILE is not: it includes O_DIRECTORY, whose value
// differs, so only its own bit __O_TMPFILE is tested).
const (
	oCreat    = 0x40
	oTrunc    = 0x200
	oTmpfile  = 0x400000 // __O_TMPFILE
	oAccmode  = 0x3
	oWronly   = 0x1
	oRdwr     = 0x2
	setIDBits = unix.S_ISUID | unix.S_ISGID
)

// renameCalls go to the supervisor under plan.Seccomp.NotifyRename.
var renameCalls = []string{"rename", "renameat", "renameat2", "link", "linkat"}

// fileRules returns the file-creation and truncation entries for cfg.
//
// No new file gets a set-user-ID or set-group-ID bit from its creation mode
// (the chmod family is the supervisor's; see package notify). mkdir and
// mkdirat need no rule: the kernel keeps only the permission and sticky
// bits of their mode (vfs_mkdir), and a directory's S_ISGID comes only from
// its parent.
//
// openat2 passes flags and mode in a struct the filter cannot read, so it
// fails with ENOSYS, as clone3 does: no C library calls it on its own, and
// the programs that do (systemd's path helpers, some hardened file
// libraries) fall back to openat, whose arguments are checked. Go's os
// package never calls it.
func fileRules(cfg plan.Seccomp) []entry {
	allow := uint32(unix.SECCOMP_RET_ALLOW)
	setID := named{setIDBits, "(S_ISUID|S_ISGID)"}
	// mode-checked calls that create an entry: sent on under NotifyCreate.
	created := allow
	if cfg.NotifyCreate {
		created = unix.SECCOMP_RET_USER_NOTIF
	}
	modeAt := func(i int) []argRule {
		return []argRule{when(errno(unix.EPERM), anySet(arg{i: i, name: "mode"}, setID))}
	}
	es := []entry{
		{name: "open", rules: openRules(cfg, 1, 2), ret: allow},
		{name: "openat", rules: openRules(cfg, 2, 3), ret: allow},
		// creat() is open(O_CREAT|O_WRONLY|O_TRUNC): write access, which
		// Landlock checks at every ABI, so only its mode matters.
		{name: "creat", rules: modeAt(1), ret: created},
		{name: "mknod", rules: modeAt(1), ret: created},
		{name: "mknodat", rules: modeAt(2), ret: created},
		{name: "openat2", ret: errno(unix.ENOSYS)},
	}
	return es
}

// createCalls go to the supervisor under plan.Seccomp.NotifyCreate, besides
// renameCalls, creat, mknod, mknodat and open/openat with O_CREAT: every
// call that adds a name to a directory (the persistence guard's refusal of
// a new .git; see package notify, create.go).
var createCalls = []string{"mkdir", "mkdirat", "symlink", "symlinkat"}

// credCalls go to the supervisor under plan.Seccomp.NotifyCreate too: setgroups,
// the call that changes a task's supplementary groups, which the
// supervisor keeps between a task's calls (reading them costs a
// generation of /proc/<tid>/status; the ids it reads each call). A
// confined task never holds CAP_SETGID, so the kernel refuses it; the
// supervisor drops what it keeps all the same and resumes the call.
var credCalls = []string{"setgroups"}

// removeCalls go to the supervisor under plan.Seccomp.NotifyGuardTree, besides
// truncate and open/openat for writing or with O_TRUNC: the calls that
// need a Landlock right the core's guarded work tree grants entry by
// entry (see notify's guard tree).
var removeCalls = []string{"unlink", "unlinkat", "rmdir"}

// openRules are those of open-style calls whose flags are argument flags
// and mode argument mode, in this order:
//
//   - O_CREAT or O_TMPFILE with a set-ID mode bit: EPERM;
//   - under NotifyTruncate (Landlock ABI < 3), O_TRUNC unless the file is
//     opened for writing: EACCES. The kernel truncates on
//     open(O_RDONLY|O_TRUNC) (and on the access mode 3, which gives
//     neither read nor write) after checking only DAC write permission,
//     and a Landlock ruleset without the TRUNCATE right then checks only
//     read access (or nothing). O_WRONLY and O_RDWR opens need Landlock's
//     WRITE_FILE at every ABI;
//   - under NotifyCreate, O_CREAT: notify;
//   - under NotifyGuardTree, any access mode but O_RDONLY, or O_TRUNC:
//     notify;
//   - else allow.
func openRules(cfg plan.Seccomp, flags, mode int) []argRule {
	notify := uint32(unix.SECCOMP_RET_USER_NOTIF)
	f := arg{i: flags, name: "flags"}
	creat := named{oCreat, "O_CREAT"}
	rs := []argRule{when(errno(unix.EPERM),
		anySet(f, named{oCreat | oTmpfile, "(O_CREAT|O_TMPFILE)"}),
		anySet(arg{i: mode, name: "mode"}, named{setIDBits, "(S_ISUID|S_ISGID)"}))}
	if cfg.NotifyTruncate {
		rs = append(rs, when(errno(unix.EACCES),
			anySet(f, named{oTrunc, "O_TRUNC"}),
			isNot(arg{i: flags, name: "flags", mask: named{oAccmode, "O_ACCMODE"}}, named{oWronly, "O_WRONLY"}, named{oRdwr, "O_RDWR"})))
	}
	if cfg.NotifyCreate {
		rs = append(rs, when(notify, anySet(f, creat)))
	}
	if cfg.NotifyGuardTree {
		rs = append(rs, when(notify, anySet(f, named{oAccmode | oTrunc, "(O_ACCMODE|O_TRUNC)"})))
	}
	return rs
}
