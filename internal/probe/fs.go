//go:build linux

package probe

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// marker is what the write vectors write.
const marker = "confine-escape"

func openRetry(path string, flags int, mode uint32) (int, error) {
	for {
		fd, err := unix.Open(path, flags, mode)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// writeMarker writes marker to fd and closes it.
func writeMarker(fd int) error {
	n, err := unix.Write(fd, []byte(marker))
	cerr := unix.Close(fd)
	if err != nil {
		return err
	}
	if n != len(marker) {
		return unix.EIO
	}
	return cerr
}

// writeVerify writes marker into path opened with flags and reads it back.
// A failing re-read (write-only access) does not undo the write: the write
// call succeeded, and the detail says the content was not verified.
func writeVerify(path string, flags int, suffix bool) result {
	fd, err := openRetry(path, flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return blocked("open "+path, err)
	}
	if err := writeMarker(fd); err != nil {
		return blocked("write "+path, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		return escaped("wrote %q to %s (not re-read: %s)", marker, path, errString(err))
	}
	if (suffix && !bytes.HasSuffix(got, []byte(marker))) || (!suffix && string(got) != marker) {
		return blockedf("write to %s returned success but the content is %q", path, truncate(got))
	}
	return escaped("wrote %q to %s (verified)", marker, path)
}

func truncate(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}

func vReadFile(args []string) result {
	fd, err := openRetry(args[0], unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return blocked("open "+args[0], err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	n, err := unix.Read(fd, buf)
	if err != nil {
		return blocked("read "+args[0], err)
	}
	if n <= 0 {
		return blockedf("read %s: 0 bytes (empty file?)", args[0])
	}
	return escaped("read %d bytes of %s", n, args[0])
}

func vWriteFile(args []string) result {
	return writeVerify(args[0], unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, false)
}

func vAppendFile(args []string) result {
	return writeVerify(args[0], unix.O_WRONLY|unix.O_APPEND, true)
}

func vShmWrite(args []string) result {
	name := args[0]
	if name == "" || strings.Contains(name, "/") || name == "." || name == ".." {
		return usage("bad shm name %q", name)
	}
	return writeVerify("/dev/shm/"+name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, false)
}

func vTruncateFile(args []string) result {
	path := args[0]
	var before unix.Stat_t
	beforeErr := unix.Stat(path, &before)
	if err := unix.Truncate(path, 0); err != nil {
		return blocked("truncate "+path, err)
	}
	var after unix.Stat_t
	if err := unix.Stat(path, &after); err != nil {
		return escaped("truncate(%s, 0) succeeded (not re-checked: %s)", path, errString(err))
	}
	if after.Size != 0 {
		return blockedf("truncate(%s, 0) returned success but size is %d", path, after.Size)
	}
	if beforeErr == nil {
		return escaped("truncated %s from %d to 0 bytes", path, before.Size)
	}
	return escaped("truncated %s to 0 bytes", path)
}

func vChmod(args []string) result {
	path := args[0]
	mode, err := strconv.ParseUint(args[1], 8, 32)
	if err != nil || mode > 0o7777 {
		return usage("bad octal mode %q", args[1])
	}
	if err := unix.Chmod(path, uint32(mode)); err != nil {
		return blocked("chmod "+path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return escaped("chmod(%s, %#o) succeeded (not re-checked: %s)", path, mode, errString(err))
	}
	if uint64(st.Mode&0o7777) != mode {
		return blockedf("chmod(%s, %#o) returned success but mode is %#o", path, mode, st.Mode&0o7777)
	}
	return escaped("chmod(%s, %#o) took effect", path, mode)
}

func vChown(args []string) result {
	path := args[0]
	uid, bad := parseUint(args[1], "uid", 32)
	if bad != nil {
		return *bad
	}
	gid, bad := parseUint(args[2], "gid", 32)
	if bad != nil {
		return *bad
	}
	if err := unix.Chown(path, int(uid), int(gid)); err != nil {
		return blocked("chown "+path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return escaped("chown(%s, %d, %d) succeeded (not re-checked: %s)", path, uid, gid, errString(err))
	}
	if uint64(st.Uid) != uid || uint64(st.Gid) != gid {
		return blockedf("chown(%s, %d, %d) returned success but owner is %d:%d", path, uid, gid, st.Uid, st.Gid)
	}
	return escaped("chown(%s, %d, %d) took effect", path, uid, gid)
}

// utimesStamp is the time utimes sets: 2001-09-09T01:46:40Z.
const utimesStamp = 1000000000

func vUtimes(args []string) result {
	path := args[0]
	ts := []unix.Timespec{{Sec: utimesStamp}, {Sec: utimesStamp}}
	if err := unix.UtimesNano(path, ts); err != nil {
		return blocked("utimes "+path, err)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return escaped("utimes(%s) succeeded (not re-checked: %s)", path, errString(err))
	}
	if st.Mtim.Sec != utimesStamp {
		return blockedf("utimes(%s) returned success but mtime is %d", path, st.Mtim.Sec)
	}
	return escaped("set mtime of %s to %d", path, utimesStamp)
}

func vSetxattr(args []string) result {
	path := args[0]
	if err := unix.Setxattr(path, "user.confine", []byte("1"), 0); err != nil {
		return blocked("setxattr "+path, err)
	}
	buf := make([]byte, 16)
	n, err := unix.Getxattr(path, "user.confine", buf)
	if err != nil {
		return escaped("setxattr(%s, user.confine=1) succeeded (not re-read: %s)", path, errString(err))
	}
	if string(buf[:n]) != "1" {
		return blockedf("setxattr returned success but user.confine is %q", buf[:n])
	}
	return escaped("set user.confine=1 on %s (verified)", path)
}

func vRemovexattr(args []string) result {
	path, name := args[0], args[1]
	if err := unix.Removexattr(path, name); err != nil {
		return blocked("removexattr "+path+" "+name, err)
	}
	_, err := unix.Getxattr(path, name, nil)
	if err == nil {
		return blockedf("removexattr(%s, %s) returned success but the attribute is still there", path, name)
	}
	return escaped("removed %s from %s", name, path)
}

func vFchmodRO(args []string) result {
	path := args[0]
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return blocked("open "+path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o777); err != nil {
		return blocked("fchmod(O_RDONLY fd, 0777)", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return escaped("fchmod(%s, 0777) through a read-only fd succeeded (not re-checked: %s)", path, errString(err))
	}
	if st.Mode&0o777 != 0o777 {
		return blockedf("fchmod returned success but mode is %#o", st.Mode&0o7777)
	}
	return escaped("fchmod(%s, 0777) through a read-only fd took effect", path)
}

func vRenameOut(args []string) result {
	src, dst := args[0], args[1]
	if err := unix.Rename(src, dst); err != nil {
		return blocked("rename "+src+" -> "+dst, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dst, &st); err != nil {
		return escaped("rename(%s, %s) succeeded (destination not re-checked: %s)", src, dst, errString(err))
	}
	return escaped("renamed %s to %s", src, dst)
}

func vLinkOut(args []string) result {
	src, dst := args[0], args[1]
	if err := unix.Link(src, dst); err != nil {
		return blocked("link "+src+" -> "+dst, err)
	}
	var a, b unix.Stat_t
	if unix.Lstat(src, &a) == nil && unix.Lstat(dst, &b) == nil && (a.Ino != b.Ino || a.Dev != b.Dev) {
		return blockedf("link(%s, %s) returned success but the files differ", src, dst)
	}
	return escaped("hard-linked %s as %s", src, dst)
}

// vSymlinkWrite creates LINK pointing at TARGET and writes through it.
func vSymlinkWrite(args []string) result {
	link, target := args[0], args[1]
	if err := unix.Symlink(target, link); err != nil {
		return blocked("symlink "+link+" -> "+target, err)
	}
	fd, err := openRetry(link, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return blocked("open through symlink "+link, err)
	}
	if err := writeMarker(fd); err != nil {
		return blocked("write through symlink "+link, err)
	}
	got, err := os.ReadFile(target)
	if err != nil {
		return escaped("wrote %q through %s -> %s (target not re-read: %s)", marker, link, target, errString(err))
	}
	if string(got) != marker {
		return blockedf("write through %s returned success but %s holds %q", link, target, truncate(got))
	}
	return escaped("wrote %q to %s through symlink %s (verified)", marker, target, link)
}

func vMknod(args []string) result {
	path := args[0]
	dev := unix.Mkdev(1, 3)
	if err := unix.Mknod(path, unix.S_IFCHR|0o666, int(dev)); err != nil {
		return blocked("mknod(c 1:3) "+path, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return escaped("mknod(%s, c 1:3) succeeded (not re-checked: %s)", path, errString(err))
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != dev {
		return blockedf("mknod returned success but %s has mode %#o rdev %#x", path, st.Mode, st.Rdev)
	}
	return escaped("created character device %s (1:3)", path)
}

func vMknodFifo(args []string) result {
	path := args[0]
	if err := unix.Mknod(path, unix.S_IFIFO|0o666, 0); err != nil {
		return blocked("mknod(fifo) "+path, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil && st.Mode&unix.S_IFMT != unix.S_IFIFO {
		return blockedf("mknod returned success but %s has mode %#o", path, st.Mode)
	}
	return escaped("created FIFO %s", path)
}

// vOpenByHandle resolves PATH to a file handle and opens the handle relative
// to MOUNTDIR (default: the directory holding PATH, which is on the same
// mount unless PATH is a mount point), bypassing path-based checks.
func vOpenByHandle(args []string) result {
	path := args[0]
	mountDir := filepath.Dir(path)
	if len(args) > 1 {
		mountDir = args[1]
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, path, 0)
	if err == unix.EOPNOTSUPP {
		return na("name_to_handle_at %s: %s (file system without handles)", path, errString(err))
	}
	if err != nil {
		return blocked("name_to_handle_at "+path, err)
	}
	mfd, err := openRetry(mountDir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		// An O_PATH descriptor is enough to name the mount.
		if mfd, err = openRetry(mountDir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return blocked("open mount dir "+mountDir, err)
		}
	}
	defer unix.Close(mfd)
	fd, err := unix.OpenByHandleAt(mfd, h, unix.O_RDONLY|unix.O_CLOEXEC)
	if err != nil {
		return blocked("open_by_handle_at", err)
	}
	defer unix.Close(fd)
	var a, b unix.Stat_t
	if unix.Fstat(fd, &a) == nil && unix.Stat(path, &b) == nil && (a.Ino != b.Ino || a.Dev != b.Dev) {
		return blockedf("open_by_handle_at opened inode %d, not %s (inode %d)", a.Ino, path, b.Ino)
	}
	return escaped("opened %s by handle (inode %d)", path, a.Ino)
}

func vBlockDevice(args []string) result {
	path := args[0]
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return blocked("open "+path, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 512)
	n, err := unix.Pread(fd, buf, 0)
	if err != nil {
		return blocked("read "+path, err)
	}
	if n <= 0 {
		return blockedf("read %s: 0 bytes", path)
	}
	return escaped("read %d bytes from %s", n, path)
}
