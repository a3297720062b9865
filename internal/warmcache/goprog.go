//go:build linux

package warmcache

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/gocacheprog"
)

// GoProg is a run's GOCACHEPROG: the launcher-side server that
// serves its GOCACHE and reads the caller's through (internal/gocacheprog).
type GoProg struct {
	server *gocacheprog.Server
	// Env is the GOCACHEPROG entry, the relay's symlink in the run's
	// private directory.
	Env string
	// Exe is the launcher's executable, which the relay runs (granted
	// read+exec as one file).
	Exe string
}

// Close stops the server; once the run's tree is gone, nothing talks to
// it.
func (g *GoProg) Close() error { return g.server.Close() }

// callerGoCache is the caller's own GOCACHE as go finds it ($GOCACHE, or
// go-build in the user cache directory; a `go env -w GOCACHE` is not
// read), "" when there is none to read through. env is the caller's
// environment.
func callerGoCache(env Env) string {
	dir := env.Get("GOCACHE")
	if dir == "" {
		d, err := env.userCacheDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(d, "go-build")
	}
	if !filepath.IsAbs(dir) {
		return "" // "off", or go would refuse it anyway
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

// StartGoProg starts the GOCACHEPROG server of a run whose GOCACHE is
// the cache own (a directory of caches), in the run's private directory
// root, when there is a caller's GOCACHE to read through; maxFile is the
// run's file-size limit, which the server's writes keep. A nil result
// (and the reason) leaves the run with its own GOCACHE alone.
func StartGoProg(env Env, own, root string, maxFile int64) (*GoProg, error) {
	caller := callerGoCache(env)
	if caller == "" {
		return nil, errors.New("no GOCACHE of the caller's to read through")
	}
	if real, err := filepath.EvalSymlinks(caller); err == nil && real == own {
		return nil, errors.New("the caller's GOCACHE is the run's")
	}
	if strings.ContainsAny(root, " \t\n'\"\\") {
		return nil, fmt.Errorf("GOCACHEPROG cannot name %q", root)
	}
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return nil, fmt.Errorf("the launcher's executable: %w", err)
	}
	if st, err := os.Stat(exe); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("the launcher's executable %s is not a file", exe)
	}
	// go fails outright when its GOCACHEPROG does not start.
	var sfs unix.Statfs_t
	if err := unix.Statfs(exe, &sfs); err != nil || sfs.Flags&unix.ST_NOEXEC != 0 {
		return nil, fmt.Errorf("the launcher's executable %s is on a noexec mount", exe)
	}
	relay := filepath.Join(root, gocacheprog.Arg0)
	if err := os.Symlink(exe, relay); err != nil {
		return nil, err
	}
	s, err := gocacheprog.Start(filepath.Join(root, gocacheprog.SocketName), own, caller, maxFile)
	if err != nil {
		_ = os.Remove(relay)
		return nil, err
	}
	return &GoProg{server: s, Env: "GOCACHEPROG=" + relay, Exe: exe}, nil
}
