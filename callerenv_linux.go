package confine

import (
	"errors"
	"path/filepath"
)

// What only Linux runs read of the caller's environment: where the
// private directory and the warm caches live.

// tempDir is os.TempDir with $TMPDIR read through e.
func (e envLookup) tempDir() string {
	if d := e.get("TMPDIR"); d != "" {
		return d
	}
	return "/tmp"
}

// userCacheDir is os.UserCacheDir with the variables read through e.
func (e envLookup) userCacheDir() (string, error) {
	if d := e.get("XDG_CACHE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", errors.New("path in $XDG_CACHE_HOME is relative")
		}
		return d, nil
	}
	h := e.get("HOME")
	if h == "" {
		return "", errors.New("neither $XDG_CACHE_HOME nor $HOME are defined")
	}
	return filepath.Join(h, ".cache"), nil
}
