//go:build !unix

package token

import (
	"errors"
	"io/fs"
	"os"
)

var errKeySymlink = errors.New("is a symlink")

// openKey refuses: without POSIX ownership and modes a key file's
// privacy cannot be checked, and no backend runs here anyway.
func openKey(path string) (*os.File, error) {
	return nil, errors.New("key files are supported only where file ownership and modes can be checked (Linux, macOS)")
}

func fileOwner(fs.FileInfo) (int, bool) { return 0, false }
