//go:build linux

// Package warmcache keeps a recipe's build caches warm across runs
// (policy.Profile.Caches), in directories confine owns, and serves the go
// recipe's GOCACHE through GOCACHEPROG, reading the caller's cache
// through.
package warmcache

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Warm build caches (policy.Profile.Caches). A recipe's build cache is kept
// across runs in a directory confine owns, never in the caller's own cache
// (which unconfined builds trust): one per user, per profile and per work
// directory, under $XDG_CACHE_HOME/confine/caches (or ~/.cache). A run can
// write its cache, so it can plant entries a later run of the same
// profile in the same work directory will use (a compiled package, a
// cached test result); it cannot reach the cache of another work
// directory, another profile or another user. docs/profiles.md says what that
// means for whoever runs the output.

// RootEnv overrides where the caches live (tests, benchmarks).
const RootEnv = "CONFINE_CACHE_DIR"

// ErrNoCache says a run goes without its warm caches (cold, as without a
// recipe), and why.
var ErrNoCache = errors.New("no warm cache")

// For is the NAME=DIR entries of the warm caches of a run of prof in
// worktree as uid (Dirs) whose writable roots are rw, nil when it gets
// none: a cache root inside one of rw (a work directory that is the home
// directory) is not used, and a cache that cannot be made leaves the run
// without its caches. Without its caches a run is only slower (cold),
// never less confined.
func For(env Env, prof policy.Profile, worktree string, uid int, rw []string) []string {
	if len(prof.Caches) == 0 {
		return nil
	}
	if root, err := Root(env, prof, worktree, uid); err != nil || !OutsideRoots(root, rw) {
		return nil
	}
	caches, _ := Dirs(env, prof, worktree, uid)
	return caches
}

// Dirs returns, for a run of prof in worktree whose command runs as
// the launcher's own uid (uid -1) or as uid, the NAME=DIR entries of its
// caches, creating the directories (0700), the caller's environment read
// through env. Each DIR is a directory of its own that the run is
// granted: never its parent, so a run cannot replace it by a symlink that
// a later run would follow into a grant.
func Dirs(env Env, prof policy.Profile, worktree string, uid int) ([]string, error) {
	if len(prof.Caches) == 0 {
		return nil, nil
	}
	root, err := Root(env, prof, worktree, uid)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCache, err)
	}
	var out []string
	for _, c := range prof.Caches {
		name, sub, ok := strings.Cut(c, "=")
		if !ok || name == "" || sub == "" || strings.Contains(sub, "/") || sub == "." || sub == ".." {
			return nil, fmt.Errorf("%w: profile %s: bad cache entry %q", ErrNoCache, prof.Name, c)
		}
		dir := filepath.Join(root, sub)
		if err := makeCache(root, dir, name, profileValue(prof, name)); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrNoCache, name, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNoCache, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%w: %s is not a directory of uid %d", ErrNoCache, dir, os.Geteuid())
		}
		out = append(out, name+"="+dir)
	}
	return out, nil
}

// Root is the directory of the warm caches of prof's runs in
// worktree whose command runs as uid (-1: the launcher's own), which no run
// is granted: under $CONFINE_CACHE_DIR, or the caller's cache directory's
// confine/caches, one per profile and work directory (a hash of its path).
// The caller's cache directory is its own (per uid); a command of another
// uid gets none (ErrNoCache).
func Root(env Env, prof policy.Profile, worktree string, uid int) (string, error) {
	if uid >= 0 && uid != os.Geteuid() {
		// The launcher's cache directory is not the command's user's to
		// reach (root's home is 0700).
		return "", fmt.Errorf("%w: the command runs as uid %d, not as the launcher", ErrNoCache, uid)
	}
	base := env.Get(RootEnv)
	if base == "" {
		d, err := env.userCacheDir()
		if err != nil {
			return "", fmt.Errorf("%w: %v", ErrNoCache, err)
		}
		base = filepath.Join(d, "confine", "caches")
	}
	sum := sha256.Sum256([]byte(worktree))
	return filepath.Join(base, prof.Name+"-"+hex.EncodeToString(sum[:8])), nil
}

// privateName is the stable private directory (HOME and TMPDIR) inside a
// cache root, beside the caches (StablePrivate refuses a profile whose
// cache entry takes the name).
const privateName = ".private"

// StablePrivate is the stable private directory (tmpdir.Stable) of a run
// of prof in worktree as uid, where prof keeps warm caches: the run's
// $HOME and $TMPDIR then keep their paths from run to run in that work
// directory, so that the toolchains' own result caches, which key on
// them (go test's), hit. nil where prof has no caches, the command runs
// as another uid, the directory lies inside one of the run's writable
// roots rw (a work directory that holds the cache directory, such as the
// home directory: the run could then replace it, or reach another's), or
// another run in the same work directory holds it: that run then gets a
// private directory of its own, as every run of a profile without caches
// does.
func StablePrivate(env Env, prof policy.Profile, worktree string, uid int, rw []string) *tmpdir.Dir {
	if len(prof.Caches) == 0 {
		return nil
	}
	for _, c := range prof.Caches {
		if _, sub, _ := strings.Cut(c, "="); sub == privateName {
			return nil
		}
	}
	root, err := Root(env, prof, worktree, uid)
	if err != nil || !OutsideRoots(root, rw) {
		return nil
	}
	d, err := tmpdir.Stable(filepath.Join(root, privateName))
	if err != nil {
		return nil
	}
	return d
}

// OutsideRoots creates the cache root dir (0700) and says whether it lies
// outside every writable root of a run (rw, resolved): a run granted a
// directory that holds it (a work directory that is the home directory)
// could replace what is in it, and reach other work directories'.
func OutsideRoots(dir string, rw []string) bool {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return false
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	for _, r := range rw {
		if spec.Within(real, r) {
			return false
		}
	}
	return true
}

// cacheSeeds fill a new cache, once, when it is created, from the caller's
// own cache: the value the profile sets NAME to (its fallback when the run
// gets no cache of its own), "" when it sets none. Keyed by NAME. A cache
// without a seed starts empty. A seed runs before any run can reach the
// cache (in a directory of its own, renamed into place), so the launcher
// never writes into a directory a run could have changed.
var cacheSeeds = map[string]func(dst, from string) error{
	"CARGO_HOME":       seedCargoHome,
	"npm_config_cache": copyCache,
}

// profileValue is what prof itself sets name to, "" if nothing.
func profileValue(prof policy.Profile, name string) string {
	return planner.GetEnv(prof.Env.Set, name)
}

// makeCache creates dir (a directory directly inside root, which no run
// is granted) if it does not exist, filled by name's seed from from.
func makeCache(root, dir, name, from string) error {
	if _, err := os.Lstat(dir); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err // Dirs checks what is there
	}
	seed := cacheSeeds[name]
	if seed == nil {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}
	tmp, err := os.MkdirTemp(root, ".new-"+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	if err := seed(tmp, from); err != nil {
		_ = os.RemoveAll(tmp)
		return err
	}
	// RENAME_NOREPLACE: a launcher that made it first (for a run that may
	// be using it already) keeps it.
	err = unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_NOREPLACE)
	if err != nil {
		_ = os.RemoveAll(tmp)
		if errors.Is(err, unix.EEXIST) {
			return nil
		}
	}
	return err
}

// cargoShared are the parts of a cargo home a run's own CARGO_HOME reads
// from the caller's through a symlink: the registry index and the .crate
// files (and git databases) the caller downloaded, and its configuration.
// The caller's CARGO_HOME is granted read-only (without its credentials),
// so a run reads them and cannot change them; cargo keeps writing what
// it derives from them (extracted sources in registry/src, git checkouts,
// its locks and its global cache tracker) in the run's own home. A link
// to what the caller does not have (yet) dangles until it does.
var cargoShared = []string{"registry/index", "registry/cache", "git/db", "config.toml", "config"}

// seedCargoHome makes dst a cargo home whose cargoShared parts are the
// caller's home from.
func seedCargoHome(dst, from string) error {
	if from == "" || !filepath.IsAbs(from) {
		return nil // nothing to read through: an empty home
	}
	if real, err := filepath.EvalSymlinks(from); err == nil {
		from = real
	}
	for _, rel := range cargoShared {
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join(from, rel), p); err != nil {
			return err
		}
	}
	return nil
}

// maxSeedCopy bounds what copyCache copies. A larger cache is not copied:
// the run then reads the caller's cache read-only, as without a cache.
const maxSeedCopy = 1 << 30

var errSeedTooLarge = errors.New("the caller's cache is larger than 1 GiB; not copied")

// copyCache copies the caller's cache from into dst: directories and
// regular files only (a symlink or device in it is left out, so the copy
// holds nothing that leads back into the caller's cache), as files of
// their own (never hard links: a run may write its copy).
func copyCache(dst, from string) error {
	if from == "" || !filepath.IsAbs(from) {
		return nil
	}
	real, err := filepath.EvalSymlinks(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var total int64
	return filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(real, p)
		if err != nil || rel == "." {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(out, 0o700)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			if total += info.Size(); total > maxSeedCopy {
				return errSeedTooLarge
			}
			return copyFile(out, p, info.Mode().Perm()&0o700)
		}
		return nil
	})
}

func copyFile(dst, src string, perm os.FileMode) error {
	in, err := os.OpenFile(src, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL|unix.O_NOFOLLOW, perm|0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
