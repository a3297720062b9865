//go:build linux

package nsinit

import "golang.org/x/sys/unix"

// MountAttr is what mount_setattr sets on a root's clone: every bind is
// nosuid (a set-user-ID file the run finds or leaves in a root never runs
// with its owner's privileges inside the run, on top of no_new_privs), and
// read-only roots are read-only.
func (k Kind) MountAttr() uint64 {
	if k == ReadOnly || k == Guarded {
		return unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID
	}
	return unix.MOUNT_ATTR_NOSUID
}

// AttrStep names the mount_setattr step for path bound as k.
func (k Kind) AttrStep(path string) string {
	if k == ReadOnly || k == Guarded {
		return "make " + path + " read-only and nosuid"
	}
	return "make " + path + " nosuid"
}
