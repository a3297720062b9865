//go:build linux

package seccomp

import (
	"slices"

	"golang.org/x/net/bpf"
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

// renameCalls go to the supervisor under Config.NotifyRename.
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
func fileRules(cfg Config) []entry {
	eperm := errno(unix.EPERM)
	modeThen := func(arg int, then uint32) func(a *assembler, _ Config) {
		return func(a *assembler, _ Config) {
			a.loadWord(argLow(arg))
			a.jumpIf(bpf.JumpBitsSet, setIDBits, a.ret(eperm), a.ret(then))
		}
	}
	// mode-checked calls that create an entry: sent on under NotifyCreate.
	created := uint32(unix.SECCOMP_RET_ALLOW)
	if cfg.NotifyCreate {
		created = unix.SECCOMP_RET_USER_NOTIF
	}
	modeDoc := []Rule{{When: "mode & (S_ISUID|S_ISGID)", Errno: unix.EPERM}}
	openDoc := []Rule{{When: "flags & (O_CREAT|O_TMPFILE) && mode & (S_ISUID|S_ISGID)", Errno: unix.EPERM}}
	if cfg.NotifyTruncate {
		openDoc = append(openDoc, Rule{When: "flags & O_TRUNC && (flags & O_ACCMODE) not O_WRONLY or O_RDWR", Errno: unix.EACCES})
	}
	if cfg.NotifyCreate {
		openDoc = append(openDoc, Rule{When: "flags & O_CREAT", Notify: true})
		modeDoc = append(slices.Clone(modeDoc), Rule{When: "otherwise", Notify: true})
	}
	if cfg.NotifyGuardTree {
		openDoc = append(openDoc, Rule{When: "flags & (O_ACCMODE|O_TRUNC)", Notify: true})
	}
	es := []entry{
		{name: "open", block: openBlock(1, 2), doc: openDoc},
		{name: "openat", block: openBlock(2, 3), doc: openDoc},
		// creat() is open(O_CREAT|O_WRONLY|O_TRUNC): write access, which
		// Landlock checks at every ABI, so only its mode matters.
		{name: "creat", block: modeThen(1, created), doc: modeDoc},
		{name: "mknod", block: modeThen(1, created), doc: modeDoc},
		{name: "mknodat", block: modeThen(2, created), doc: modeDoc},
		{name: "openat2", ret: errno(unix.ENOSYS), doc: []Rule{{Errno: unix.ENOSYS}}},
	}
	if cfg.NotifyTruncate || cfg.NotifyGuardTree {
		es = append(es, entry{name: "truncate", ret: unix.SECCOMP_RET_USER_NOTIF, doc: []Rule{{Notify: true}}})
	}
	if cfg.NotifyRename || cfg.NotifyCreate {
		for _, n := range renameCalls {
			es = append(es, entry{name: n, ret: unix.SECCOMP_RET_USER_NOTIF, doc: []Rule{{Notify: true}}})
		}
	}
	if cfg.NotifyCreate {
		for _, n := range slices.Concat(createCalls, credCalls) {
			es = append(es, entry{name: n, ret: unix.SECCOMP_RET_USER_NOTIF, doc: []Rule{{Notify: true}}})
		}
	}
	if cfg.NotifyGuardTree {
		for _, n := range removeCalls {
			es = append(es, entry{name: n, ret: unix.SECCOMP_RET_USER_NOTIF, doc: []Rule{{Notify: true}}})
		}
	}
	return es
}

// createCalls go to the supervisor under Config.NotifyCreate, besides
// renameCalls, creat, mknod, mknodat and open/openat with O_CREAT: every
// call that adds a name to a directory (the persistence guard's refusal of
// a new .git; see package notify, create.go).
var createCalls = []string{"mkdir", "mkdirat", "symlink", "symlinkat"}

// credCalls go to the supervisor under Config.NotifyCreate too: setgroups,
// the call that changes a task's supplementary groups, which the
// supervisor keeps between a task's calls (reading them costs a
// generation of /proc/<tid>/status; the ids it reads each call). A
// confined task never holds CAP_SETGID, so the kernel refuses it; the
// supervisor drops what it keeps all the same and resumes the call.
var credCalls = []string{"setgroups"}

// removeCalls go to the supervisor under Config.NotifyGuardTree, besides
// truncate and open/openat for writing or with O_TRUNC: the calls that
// need a Landlock right the core's guarded work tree grants entry by
// entry (see notify's guard tree).
var removeCalls = []string{"unlink", "unlinkat", "rmdir"}

// openBlock checks open-style calls whose flags are argument flags and
// mode argument mode, in this order:
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
func openBlock(flags, mode int) func(a *assembler, cfg Config) {
	return func(a *assembler, cfg Config) {
		notif := a.ret(unix.SECCOMP_RET_USER_NOTIF)
		checks := a.newLabel()
		creates := a.newLabel()
		a.loadWord(argLow(flags))
		a.jumpIf(bpf.JumpBitsSet, oCreat|oTmpfile, creates, checks)
		a.mark(creates)
		a.loadWord(argLow(mode))
		a.jumpIf(bpf.JumpBitsSet, setIDBits, a.ret(errno(unix.EPERM)), next)
		a.loadWord(argLow(flags))
		a.mark(checks) // A holds flags on both paths here
		if cfg.NotifyTruncate {
			after, ok := a.newLabel(), a.newLabel()
			a.jumpIf(bpf.JumpBitsSet, oTrunc, next, after)
			a.insn(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: oAccmode})
			a.jumpIf(bpf.JumpEqual, oWronly, ok, next)
			a.jumpIf(bpf.JumpEqual, oRdwr, ok, a.ret(errno(unix.EACCES)))
			a.mark(ok)
			a.loadWord(argLow(flags))
			a.mark(after)
		}
		if cfg.NotifyCreate {
			a.jumpIf(bpf.JumpBitsSet, oCreat, notif, next)
		}
		if cfg.NotifyGuardTree {
			a.jumpIf(bpf.JumpBitsSet, oAccmode|oTrunc, notif, next)
		}
		a.jump(a.ret(unix.SECCOMP_RET_ALLOW))
	}
}
