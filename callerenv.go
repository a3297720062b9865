//go:build linux

package confine

import (
	"errors"
	"os"
	"path/filepath"
)

// envLookup reads one variable of the caller's environment (os.LookupEnv
// for a program's own; Launcher.CallerEnv for a server's client).
type envLookup func(name string) (string, bool)

func (l *Launcher) callerEnv() envLookup {
	if l.CallerEnv != nil {
		return l.CallerEnv
	}
	return os.LookupEnv
}

func (e envLookup) get(name string) string {
	v, _ := e(name)
	return v
}

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
