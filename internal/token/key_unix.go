//go:build unix

package token

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// errKeySymlink is what openKey returns for a key path that is a symlink.
var errKeySymlink = errors.New("is a symlink")

// openKey opens a key file without following a final symlink (and without
// blocking on a FIFO planted there).
func openKey(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errKeySymlink
	}
	return f, err
}

// fileOwner is the uid that owns the file st describes.
func fileOwner(st fs.FileInfo) (int, bool) {
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(sys.Uid), true
}
