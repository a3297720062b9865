//go:build linux

package planner

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/internal/persist"
	"github.com/confine-sandbox/confine/spec"
)

// ProfileGuard applies a profile's [guard] changes (g) in Tier 2, at
// launch, beside gitGuard (which keeps git's set as a whole: a git row
// moved to report waives no-git-persistence, policy.Profile.Waives). It
// returns:
//
//   - the paths every backend keeps read-only besides gitGuard's: what
//     matches a refused row other than git's (an editor row moved there,
//     a row the profile added), in every writable root, at any depth (a
//     matching directory with everything in it); guarded are gitGuard's,
//     not entered;
//   - the paths the persistence report watches besides its own table
//     (persist.TakeWith): in the work tree, what matches a row the
//     profile moved or added (refused or reported), and each such row's
//     place at the top level where its pattern names one (a "**/" prefix
//     dropped, no other wildcard), so that one made during the run is
//     reported.
//
// It walks the writable roots only when the profile changes the set. It
// refuses what it cannot keep read-only (a symlink or special file that
// matches a refused row) and a writable root inside such a path.
func ProfileGuard(rw []string, worktree string, guarded []string, changed bool, g guardset.Policy) ([]string, []persist.Watch, error) {
	if !changed {
		return nil, nil, nil
	}
	refused, reported := g.Refused(), g.Reported()
	var keep []string
	var watch []persist.Watch
	watchRow := func(rel string, e guardset.Entry) {
		watch = append(watch, persist.Watch{Path: rel, What: "guard row " + e.Name + " (" + e.Why + ")"})
	}
	// The rows at their defaults are in persist's own table.
	changedRow := func(e guardset.Entry) bool { return e.Class == guardset.Profile || g.Action(e) != e.Default }
	for _, rows := range [][]guardset.Entry{refused, reported} {
		for _, e := range rows {
			if rel, ok := topLevel(e.Pattern); ok && changedRow(e) {
				watchRow(rel, e)
			}
		}
	}
	budget := maxGuardWalk
	for _, r := range rw {
		err := walkRoot(r, rw, &budget, func(dir string, de fs.DirEntry) (bool, error) {
			p := filepath.Join(dir, de.Name())
			if row, ok := guardset.Classify(de.Name()); ok && row.Name == gitDirRow {
				return false, nil // git's own (gitGuard)
			}
			for _, q := range guarded {
				if spec.Within(p, q) {
					return false, nil
				}
			}
			rel, err := filepath.Rel(r, p)
			if err != nil {
				return false, err
			}
			for _, e := range refused {
				if de.Type()&fs.ModeSymlink != 0 && guardset.MatchAlias(e, rel) {
					return false, fmt.Errorf("%s is a symlink where the refused row %s (%s) could lead a path it matches into another directory", p, e.Name, e.Pattern)
				}
				if !guardset.Match(e, rel) {
					continue
				}
				if t := de.Type(); !t.IsDir() && !t.IsRegular() {
					return false, fmt.Errorf("%s matches the refused row %s but is a %s, which the guard cannot keep read-only", p, e.Name, kindOf(t))
				}
				keep = append(keep, p)
				if r == worktree {
					watchRow(rel, e)
				}
				return false, nil
			}
			for _, e := range reported {
				if r == worktree && changedRow(e) && guardset.Match(e, rel) {
					watchRow(rel, e)
				}
			}
			return true, nil
		})
		if err != nil {
			return nil, nil, profileRefusal(err.Error())
		}
	}
	for _, r := range rw {
		for _, k := range keep {
			if spec.Within(r, k) {
				return nil, nil, profileRefusal(fmt.Sprintf("writable root %s lies inside %s, which the profile's [guard] refuses", r, k))
			}
		}
	}
	return keep, watch, nil
}

// profileRefusal is the error of a run whose profile's refused rows the
// guard cannot keep.
func profileRefusal(why string) error {
	return fmt.Errorf("%w: %w: %s; change the profile's [guard] to leave it out", spec.ErrUnavailable, ErrGuard, why)
}

// topLevel is pattern's place at the top level of a root: the pattern
// less a leading "**/", when what is left names one path (no wildcard).
func topLevel(pattern string) (string, bool) {
	rest := strings.TrimPrefix(pattern, "**/")
	for _, c := range strings.Split(rest, "/") {
		if c == "*" || c == "**" {
			return "", false
		}
	}
	return rest, true
}
