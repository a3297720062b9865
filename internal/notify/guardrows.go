//go:build linux

package notify

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/guardset"
)

// A profile's [guard] can refuse rows besides git's (an editor row moved
// to refused, a row of its own: plan.Plan.GuardRows). What matches one at
// launch is kept read-only like .git (plan.Plan.Guarded); what the command
// makes during the run is refused here, on every call that adds a name
// (create.go: the same calls that refuse a new .git), with the row's
// pattern matched against the new entry's path relative to each writable
// root holding it, as Tier 1 does (guardset.Policy.Classify). A directory
// moved into place is refused when it holds an entry a row would match
// there (carriedRow), as one holding a .git is (holdsGit).

// maxCarriedWalk bounds the walk of a directory being moved: beyond it the
// move is refused (the guard cannot say what it carries).
const maxCarriedWalk = 100_000

// rowRefusal is the reason a call refused under a row gives.
func rowRefusal(e guardset.Entry, rel string) string {
	return guardset.Refusal(rel, e).Error()
}

// relIn returns real (a directory's path from d_path) joined with name,
// relative to root, and whether real lies in root.
func relIn(root, real, name string) (string, bool) {
	if !beneath(real, root) {
		return "", false
	}
	rest := strings.TrimPrefix(real[len(root):], "/")
	if root == "/" {
		rest = strings.TrimPrefix(real, "/")
	}
	if rest == "" {
		return name, true
	}
	return rest + "/" + name, true
}

// refusedRow returns the row (plan.Plan.GuardRows) the entry name of the
// directory real matches, relative to a writable root holding it.
func (p *policy) refusedRow(real, name string) (guardset.Entry, string, bool) {
	return p.rowFor(real, name, guardset.Match)
}

// aliasRow returns the row a symlink at the entry name of the directory
// real could alias a directory for (guardset.MatchAlias).
func (p *policy) aliasRow(real, name string) (guardset.Entry, string, bool) {
	return p.rowFor(real, name, guardset.MatchAlias)
}

// rowFor returns the first row match accepts for the entry name of the
// directory real, relative to a writable root holding it.
func (p *policy) rowFor(real, name string, match func(guardset.Entry, string) bool) (guardset.Entry, string, bool) {
	name = strings.TrimRight(name, "/")
	if len(p.rows) == 0 || name == "" || name == "." || name == ".." {
		return guardset.Entry{}, "", false
	}
	for _, r := range p.roots {
		rel, ok := relIn(r, real, name)
		if !ok {
			continue
		}
		for _, e := range p.rows {
			if match(e, rel) {
				return e, rel, true
			}
		}
	}
	return guardset.Entry{}, "", false
}

// rowSymlink checks a new symlink at the entry name of directory dir: its
// name (rowNew), and whether it could alias a directory for a row.
func (t *task) rowSymlink(dir int, name string) bool {
	if len(t.h.s.pol.rows) == 0 {
		return false
	}
	if t.rowNew(dir, name) {
		return true
	}
	real, ok := fdPath(dir)
	if !ok {
		t.rowWhy = "persistence guard: cannot determine a parent directory's path"
		return true
	}
	if e, rel, ok := t.h.s.pol.aliasRow(real, name); ok {
		t.rowWhy = rowRefusal(e, rel) + " (a symlink there would lead a path the row matches elsewhere)"
		t.rowPath = real + "/" + strings.TrimRight(name, "/")
		return true
	}
	return false
}

// rowNew checks the new entry name of directory dir (a descriptor) against
// the rows; when one matches, t.rowWhy says which and the call answers
// EPERM (t.rowDeny turns it into the refusal).
func (t *task) rowNew(dir int, name string) bool {
	pol := &t.h.s.pol
	if len(pol.rows) == 0 {
		return false
	}
	real, ok := fdPath(dir)
	if !ok {
		t.rowWhy = "persistence guard: cannot determine a parent directory's path"
		return true
	}
	if e, rel, ok := pol.refusedRow(real, name); ok {
		t.rowWhy, t.rowPath = rowRefusal(e, rel), real+"/"+strings.TrimRight(name, "/")
		return true
	}
	return false
}

// rowMove checks a rename or link of the entry oldName of directory src
// to newName of directory dst: the new name itself (rowNew), a symlink
// as rowSymlink does and, for a directory, every entry it holds, at the
// place it would take. An empty oldName (a link of an open file) checks
// the name only.
func (t *task) rowMove(src int, oldName string, dst int, newName string) bool {
	pol := &t.h.s.pol
	if len(pol.rows) == 0 {
		return false
	}
	if t.rowNew(dst, newName) {
		return true
	}
	if oldName == "" {
		return false
	}
	var st unix.Stat_t
	if unix.Fstatat(src, strings.TrimRight(oldName, "/"), &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
		return t.rowSymlink(dst, newName)
	}
	real, ok := fdPath(dst)
	if !ok {
		t.rowWhy = "persistence guard: cannot determine a parent directory's path"
		return true
	}
	var below []string // the new place relative to each root that could hold a match below it
	for _, r := range pol.roots {
		rel, ok := relIn(r, real, strings.TrimRight(newName, "/"))
		if !ok {
			continue
		}
		for _, e := range pol.rows {
			if guardset.MatchBelow(e, rel) {
				below = append(below, rel)
				break
			}
		}
	}
	if len(below) == 0 {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
	fd, err := unix.Openat2(src, strings.TrimRight(oldName, "/"), &how)
	if err != nil {
		return false // not a directory (or gone: the call fails on its own)
	}
	budget := maxCarriedWalk
	e, rel, found, complete := pol.carriedRow(fd, below, &budget)
	switch {
	case !complete:
		t.rowWhy = "persistence guard: a directory too large to check against the profile's refused rows, moved"
	case found:
		t.rowWhy = rowRefusal(e, rel) + " (in a directory moved there)"
	default:
		return false
	}
	t.rowPath = real + "/" + strings.TrimRight(newName, "/")
	return true
}

// carriedRow walks the directory dir (a descriptor it closes), whose
// entries would lie at each of places (relative to a root), for an entry
// matching a row; complete is false when the walk could not finish.
func (p *policy) carriedRow(dir int, places []string, budget *int) (e guardset.Entry, rel string, found, complete bool) {
	f := os.NewFile(uintptr(dir), "")
	defer f.Close()
	des, err := f.ReadDir(-1)
	if err != nil {
		return e, "", false, false
	}
	*budget -= len(des)
	if *budget < 0 {
		return e, "", false, false
	}
	for _, de := range des {
		for _, place := range places {
			q := place + "/" + de.Name()
			for _, row := range p.rows {
				if guardset.Match(row, q) {
					return row, q, true, true
				}
			}
		}
		if !de.IsDir() {
			continue
		}
		var sub []string
		for _, place := range places {
			q := place + "/" + de.Name()
			for _, row := range p.rows {
				if guardset.MatchBelow(row, q) {
					sub = append(sub, q)
					break
				}
			}
		}
		if len(sub) == 0 {
			continue
		}
		fd, err := unix.Openat(int(f.Fd()), de.Name(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return e, "", false, false
		}
		if e, rel, found, complete = p.carriedRow(fd, sub, budget); found || !complete {
			return e, rel, found, complete
		}
	}
	return e, "", false, true
}

// rowDeny turns the answer of a call a row refused (rowNew, rowMove) into
// the refusal, naming the row.
func (t *task) rowDeny(r result) result {
	if t.rowWhy != "" && r.errno == unix.EPERM && !r.denied {
		return deny(unix.EPERM, t.rowWhy, t.rowPath)
	}
	return r
}
