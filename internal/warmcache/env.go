//go:build linux

package warmcache

import (
	"errors"
	"path/filepath"
)

// Env reads one variable of the caller's environment (os.LookupEnv for a
// program's own; confine.Launcher.CallerEnv for a server's client).
type Env func(name string) (string, bool)

// Get is the variable's value, "" when unset.
func (e Env) Get(name string) string {
	v, _ := e(name)
	return v
}

// userCacheDir is os.UserCacheDir with the variables read through e.
func (e Env) userCacheDir() (string, error) {
	if d := e.Get("XDG_CACHE_HOME"); d != "" {
		if !filepath.IsAbs(d) {
			return "", errors.New("path in $XDG_CACHE_HOME is relative")
		}
		return d, nil
	}
	h := e.Get("HOME")
	if h == "" {
		return "", errors.New("neither $XDG_CACHE_HOME nor $HOME are defined")
	}
	return filepath.Join(h, ".cache"), nil
}
