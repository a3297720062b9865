//go:build linux

package confine

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/policy"
)

// Warm build caches (policy.Profile.Caches). A recipe's build cache is kept
// across runs in a directory confine owns, never in the caller's own cache
// (which unconfined builds trust): one per user, per profile and per work
// directory, under $XDG_CACHE_HOME/confine/caches (or ~/.cache). A run can
// write its cache, so it can plant entries a later run of the same
// profile in the same work directory will use (a compiled package, a
// cached test result); it cannot reach the cache of another work
// directory, another profile or another user. The README says what that
// means for whoever runs the output.

// cacheRootEnv overrides where the caches live (tests, benchmarks).
const cacheRootEnv = "CONFINE_CACHE_DIR"

// errNoCache says a run goes without its warm caches (cold, as without a
// recipe), and why.
var errNoCache = errors.New("no warm cache")

// cacheDirs returns, for a run of prof in worktree whose command runs as
// the launcher's own uid (uid -1) or as uid, the NAME=DIR entries of its
// caches, creating the directories (0700). Each DIR is a directory of its
// own that the run is granted: never its parent, so a run cannot replace
// it by a symlink that a later run would follow into a grant.
func cacheDirs(prof policy.Profile, worktree string, uid int) ([]string, error) {
	if len(prof.Caches) == 0 {
		return nil, nil
	}
	if uid >= 0 && uid != os.Geteuid() {
		// The launcher's cache directory is not the command's user's to
		// reach (root's home is 0700).
		return nil, fmt.Errorf("%w: the command runs as uid %d, not as the launcher", errNoCache, uid)
	}
	base := os.Getenv(cacheRootEnv)
	if base == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errNoCache, err)
		}
		base = filepath.Join(d, "confine", "caches")
	}
	sum := sha256.Sum256([]byte(worktree))
	root := filepath.Join(base, prof.Name+"-"+hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %v", errNoCache, err)
	}
	var out []string
	for _, c := range prof.Caches {
		name, sub, ok := strings.Cut(c, "=")
		if !ok || name == "" || sub == "" || strings.Contains(sub, "/") || sub == "." || sub == ".." {
			return nil, fmt.Errorf("%w: profile %s: bad cache entry %q", errNoCache, prof.Name, c)
		}
		dir := filepath.Join(root, sub)
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, fmt.Errorf("%w: %v", errNoCache, err)
		}
		var st unix.Stat_t
		if err := unix.Lstat(dir, &st); err != nil {
			return nil, fmt.Errorf("%w: %v", errNoCache, err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%w: %s is not a directory of uid %d", errNoCache, dir, os.Geteuid())
		}
		out = append(out, name+"="+dir)
	}
	return out, nil
}
