//go:build linux

package probe

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// Vectors that leave a set-user-ID or set-group-ID file behind (it outlives
// the run: whoever executes it later runs as its owner), truncate a file
// without write access to it (Landlock ABI < 3 has no TRUNCATE right), or
// move or link a file across the writable roots' boundary through the
// paths the rename handlers of Landlock ABI 1 take.

// parseMode reads an octal mode argument.
func parseMode(s string) (uint32, *result) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o7777 {
		r := usage("bad octal mode %q", s)
		return 0, &r
	}
	return uint32(m), nil
}

// setIDResult reports whether path carries the set-ID bits of want.
func setIDResult(what, path string, want uint32) result {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return blocked("stat "+path+" after "+what, err)
	}
	if got := st.Mode & want & (unix.S_ISUID | unix.S_ISGID); got != 0 {
		return escaped("%s left %s with mode %#o (owner %d:%d)", what, path, st.Mode&0o7777, st.Uid, st.Gid)
	}
	return blockedf("%s succeeded but %s has mode %#o (set-ID bits dropped)", what, path, st.Mode&0o7777)
}

// vOpenCreatMode: open(PATH, O_CREAT|O_EXCL|O_WRONLY, MODE).
func vOpenCreatMode(args []string) result {
	path := args[0]
	mode, bad := parseMode(args[1])
	if bad != nil {
		return *bad
	}
	fd, err := openRetry(path, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err != nil {
		return blocked("open(O_CREAT, "+args[1]+") "+path, err)
	}
	unix.Close(fd)
	return setIDResult("open(O_CREAT, "+args[1]+")", path, mode)
}

// vOpenTmpfileMode: open(DIR, O_TMPFILE|O_WRONLY, MODE), then link the
// anonymous file as DIR/NAME through /proc/self/fd.
func vOpenTmpfileMode(args []string) result {
	dir, name := args[0], args[1]
	mode, bad := parseMode(args[2])
	if bad != nil {
		return *bad
	}
	fd, err := openRetry(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, mode)
	if err == unix.EOPNOTSUPP || err == unix.EISDIR {
		return na("open(O_TMPFILE) in %s: %s (file system without O_TMPFILE)", dir, errString(err))
	}
	if err != nil {
		return blocked("open(O_TMPFILE, "+args[2]+") "+dir, err)
	}
	defer unix.Close(fd)
	path := dir + "/" + name
	if err := unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW); err != nil {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) == nil && st.Mode&mode&(unix.S_ISUID|unix.S_ISGID) != 0 {
			return escaped("open(O_TMPFILE, %s) made a file of mode %#o (not linked: %s)", args[2], st.Mode&0o7777, errString(err))
		}
		return blocked("linkat of the O_TMPFILE file as "+path, err)
	}
	return setIDResult("open(O_TMPFILE, "+args[2]+") and linkat", path, mode)
}

// vMknodMode: mknod(PATH, S_IFREG|MODE, 0), which makes a regular file
// without any capability.
func vMknodMode(args []string) result {
	path := args[0]
	mode, bad := parseMode(args[1])
	if bad != nil {
		return *bad
	}
	if err := unix.Mknod(path, unix.S_IFREG|mode, 0); err != nil {
		return blocked("mknod(S_IFREG|"+args[1]+") "+path, err)
	}
	return setIDResult("mknod(S_IFREG|"+args[1]+")", path, mode)
}

// vOpenat2CreatMode: openat2(PATH, {O_CREAT|O_EXCL|O_WRONLY, MODE}), whose
// mode a seccomp filter cannot read.
func vOpenat2CreatMode(args []string) result {
	path := args[0]
	mode, bad := parseMode(args[1])
	if bad != nil {
		return *bad
	}
	how := unix.OpenHow{Flags: unix.O_CREAT | unix.O_EXCL | unix.O_WRONLY | unix.O_CLOEXEC, Mode: uint64(mode)}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err != nil {
		return blocked("openat2(O_CREAT, "+args[1]+") "+path, err)
	}
	unix.Close(fd)
	return setIDResult("openat2(O_CREAT, "+args[1]+")", path, mode)
}

// truncOpenFlags are the access modes vOpenTrunc tries: read-only, and 3,
// which the kernel opens with neither read nor write access.
var truncOpenFlags = map[string]int{"rdonly": unix.O_RDONLY, "accmode3": 3}

// vOpenTrunc: open(PATH, ACCESS|O_TRUNC) with an access mode that does not
// write; the kernel truncates all the same.
func vOpenTrunc(args []string) result {
	path := args[0]
	acc, ok := truncOpenFlags[args[1]]
	if !ok {
		return usage("bad access mode %q (rdonly or accmode3)", args[1])
	}
	return truncResult("open("+args[1]+"|O_TRUNC)", path, func() (int, error) {
		return openRetry(path, acc|unix.O_TRUNC|unix.O_CLOEXEC, 0)
	})
}

// vOpenat2Trunc: openat2(PATH, {O_RDONLY|O_TRUNC}).
func vOpenat2Trunc(args []string) result {
	path := args[0]
	return truncResult("openat2(O_RDONLY|O_TRUNC)", path, func() (int, error) {
		return unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_TRUNC | unix.O_CLOEXEC})
	})
}

func truncResult(what, path string, open func() (int, error)) result {
	// The size before is only for the detail: a sandbox may hide the
	// file altogether, and then the open fails.
	var before unix.Stat_t
	_ = unix.Stat(path, &before)
	fd, err := open()
	if err != nil {
		return blocked(what+" "+path, err)
	}
	unix.Close(fd)
	var after unix.Stat_t
	if err := unix.Stat(path, &after); err != nil {
		return escaped("%s %s succeeded (not re-checked: %s)", what, path, errString(err))
	}
	if after.Size == 0 && before.Size > 0 {
		return escaped("%s truncated %s from %d to 0 bytes", what, path, before.Size)
	}
	return blockedf("%s %s succeeded but the size is %d (was %d)", what, path, after.Size, before.Size)
}

// vLinkatFollow: linkat(SRC, DST, AT_SYMLINK_FOLLOW): SRC is a symlink, and
// what gets linked is its target.
func vLinkatFollow(args []string) result {
	src, dst := args[0], args[1]
	if err := unix.Linkat(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.AT_SYMLINK_FOLLOW); err != nil {
		return blocked("linkat(AT_SYMLINK_FOLLOW) "+src+" -> "+dst, err)
	}
	return escaped("hard-linked the target of %s as %s", src, dst)
}

// vRenameExchange: renameat2(A, B, RENAME_EXCHANGE) swaps the two names.
func vRenameExchange(args []string) result {
	a, b := args[0], args[1]
	if err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE); err != nil {
		return blocked("renameat2(RENAME_EXCHANGE) "+a+" <-> "+b, err)
	}
	return escaped("exchanged %s and %s", a, b)
}
