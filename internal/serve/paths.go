//go:build linux

package serve

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// SocketName is the socket's name in its directory.
const SocketName = "serve.sock"

// DefaultSocket is where a user's server listens unless told otherwise:
// $XDG_RUNTIME_DIR/confine/serve.sock, or /tmp/confine-UID/serve.sock when
// XDG_RUNTIME_DIR is unset (or not absolute). getenv reads the caller's
// environment.
func DefaultSocket(getenv func(string) string) string {
	if d := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "confine", SocketName)
	}
	return filepath.Join(os.TempDir(), "confine-"+strconv.Itoa(os.Geteuid()), SocketName)
}

// CheckDir refuses dir unless it is a directory (not a symlink to one)
// owned by this process's euid that no other user can enter or write:
// mode 0700 or stricter.
func CheckDir(dir string) error {
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrUnsafeDir, dir, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%w: %s is not a directory", ErrUnsafeDir, dir)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%w: %s belongs to uid %d, not to uid %d", ErrUnsafeDir, dir, st.Uid, os.Geteuid())
	case st.Mode&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %04o; it must be 0700 (no access for group or others)", ErrUnsafeDir, dir, st.Mode&0o7777)
	}
	return nil
}

// prepareDir makes the default socket's directory (mode 0700) if missing
// and checks it. An explicit --socket's directory is only checked: it is
// the caller's to make.
func prepareDir(dir string, create bool) error {
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s: %v", ErrUnsafeDir, dir, err)
		}
	}
	return CheckDir(dir)
}
