// Package ctlpaths names confine's own control surfaces on this host: the
// directories that hold the capability and approval key, the event log
// (and its rotated files) and the warm servers' sockets. No confined run
// may reach them (docs/control-plane.md): the launcher refuses a run whose
// writable roots cover one and leaves them out of read-only grants.
package ctlpaths

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Rule is one control surface: where it lives, relative to what.
type Rule struct {
	Name string
	// Path returns the surface's absolute path from the environment
	// getenv and the home directory home ("" when none applies).
	Path func(getenv func(string) string, home string, uid int) string
	// IfExists: the surface counts only where it exists. A server's
	// socket directory that no server made holds nothing to reach (and a
	// server that makes it later refuses clients inside runs); the key's
	// and the log's directories count even before they exist, since a
	// command that may create them could plant a key or a symlink the
	// host's confine would then use.
	IfExists bool
}

// rules are confine's control surfaces, one row each (the same defaults
// internal/cli, internal/eventlog and internal/serve use).
var rules = []Rule{
	{Name: "config directory (capability and approval key)", Path: func(getenv func(string) string, home string, _ int) string {
		if d := getenv("XDG_CONFIG_HOME"); filepath.IsAbs(d) {
			return filepath.Join(d, "confine")
		}
		return joinHome(home, ".config", "confine")
	}},
	{Name: "config directory (capability and approval key)", Path: func(_ func(string) string, home string, _ int) string {
		return joinHome(home, ".config", "confine")
	}},
	{Name: "state directory (event log)", Path: func(getenv func(string) string, home string, _ int) string {
		if d := getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
			return filepath.Join(d, "confine")
		}
		return joinHome(home, ".local", "state", "confine")
	}},
	{Name: "state directory (event log)", Path: func(_ func(string) string, home string, _ int) string {
		return joinHome(home, ".local", "state", "confine")
	}},
	{Name: eventLog, Path: func(getenv func(string) string, _ string, _ int) string {
		if p := getenv("CONFINE_EVENT_LOG"); filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return ""
	}},
	{Name: "server socket directory", IfExists: true, Path: func(getenv func(string) string, _ string, _ int) string {
		if d := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
			return filepath.Join(d, "confine")
		}
		return ""
	}},
	{Name: "server socket directory", IfExists: true, Path: func(getenv func(string) string, _ string, uid int) string {
		if d := getenv("TMPDIR"); filepath.IsAbs(d) {
			return filepath.Join(d, "confine-"+strconv.Itoa(uid))
		}
		return ""
	}},
	{Name: "server socket directory", IfExists: true, Path: func(_ func(string) string, _ string, uid int) string {
		return filepath.Join("/tmp", "confine-"+strconv.Itoa(uid))
	}},
}

// eventLog names a log file rule: its rotated files (PATH.1, ...) count
// too (AddLog).
const eventLog = "event log"

// AddLog adds the event log at p and its rotated files (PATH.N, as
// internal/eventlog names them) that exist now; one rotated later lands in
// the same directory, which a read-only grant then no longer covers whole.
func AddLog(ps []Path, p string) []Path {
	ps = Add(ps, eventLog, p)
	rotated, _ := filepath.Glob(globEscape(p) + ".[0-9]*")
	for _, r := range rotated {
		ps = Add(ps, eventLog+" (rotated)", r)
	}
	return ps
}

// globEscape quotes the glob metacharacters of p.
func globEscape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`*?[\\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func joinHome(home string, elem ...string) string {
	if !filepath.IsAbs(home) {
		return ""
	}
	return filepath.Join(append([]string{home}, elem...)...)
}

// Path is one control surface found for a run.
type Path struct {
	Path string // absolute, clean; symlinks resolved where they exist
	What string // the rule's name
}

// Find returns the control surfaces for uid under the environment getenv
// (its $HOME, and the user database's home for uid), each also by its
// resolved path when a symlink leads there, without duplicates.
func Find(getenv func(string) string, uid int) []Path {
	return FindAll(Source{Getenv: getenv, UID: uid})
}

// Source is one environment (nil: none) and uid whose control surfaces
// count for a run.
type Source struct {
	Getenv func(string) string
	UID    int
}

// candidate is one rule's path, before the filesystem is asked.
type candidate struct {
	what, path    string
	ifExists, log bool
}

// FindAll is Find over every source at once: a path that several sources
// name (the caller's environment and the launcher's are often the same)
// is looked at on the filesystem once. The filesystem is asked at every
// call: a surface that appeared since the last run counts.
func FindAll(srcs ...Source) []Path {
	var cands []candidate
	for _, src := range srcs {
		getenv := src.Getenv
		if getenv == nil {
			getenv = func(string) string { return "" }
		}
		homes := []string{getenv("HOME")}
		if h, ok := userHome(src.UID); ok && h != homes[0] {
			homes = append(homes, h)
		}
		for _, home := range homes {
			for _, r := range rules {
				c := candidate{what: r.Name, path: r.Path(getenv, home, src.UID), ifExists: r.IfExists, log: r.Name == eventLog}
				if c.path != "" && !slices.Contains(cands, c) {
					cands = append(cands, c)
				}
			}
		}
	}
	var out []Path
	for _, c := range cands {
		if _, err := os.Lstat(c.path); err != nil && c.ifExists {
			continue
		}
		if c.log {
			out = AddLog(out, c.path)
			continue
		}
		out = Add(out, c.what, c.path)
	}
	return out
}

// passwd is the user database's file, whose identity keys the homes
// userHome remembers.
var passwd = "/etc/passwd"

// dbHome is one remembered answer of the user database.
type dbHome struct {
	file os.FileInfo // passwd when it was asked
	home string
	ok   bool
}

var dbHomes sync.Map // uid -> dbHome

// userHome is uid's home in the user database. The answer is remembered
// per process while /etc/passwd stays the same file with the same size
// and modification time (a lookup costs a parse of the whole file, or an
// NSS call), and asked again when it changed or cannot be checked.
func userHome(uid int) (string, bool) {
	fi, err := os.Stat(passwd)
	if err == nil {
		if v, ok := dbHomes.Load(uid); ok {
			h := v.(dbHome)
			if os.SameFile(h.file, fi) && h.file.Size() == fi.Size() && h.file.ModTime().Equal(fi.ModTime()) {
				return h.home, h.ok
			}
		}
	}
	u, lerr := user.LookupId(strconv.Itoa(uid))
	h := dbHome{file: fi, ok: lerr == nil}
	if h.ok {
		h.home = u.HomeDir
	}
	if err == nil {
		dbHomes.Store(uid, h)
	}
	return h.home, h.ok
}

// Add appends p (and its resolved form) to ps unless already there.
func Add(ps []Path, what, p string) []Path {
	if !filepath.IsAbs(p) {
		return ps
	}
	if slices.ContainsFunc(ps, func(x Path) bool { return x.Path == filepath.Clean(p) }) {
		// Added before, with its resolved form.
		return ps
	}
	for _, c := range []string{filepath.Clean(p), Resolve(p)} {
		if !slices.ContainsFunc(ps, func(x Path) bool { return x.Path == c }) {
			ps = append(ps, Path{Path: c, What: what})
		}
	}
	return ps
}

// Resolve resolves the symlinks of p's longest existing prefix and
// appends the rest: where p would be created.
func Resolve(p string) string {
	p = filepath.Clean(p)
	rest := ""
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = filepath.Join(filepath.Base(cur), rest)
		cur = parent
	}
}

// Overlap returns the first control surface that lies within root, or
// that root lies within (a grant of the surface itself or of a directory
// inside it).
func Overlap(root string, ps []Path) (Path, bool) {
	for _, p := range ps {
		if within(p.Path, root) || within(root, p.Path) {
			return p, true
		}
	}
	return Path{}, false
}

// Under returns the surfaces strictly inside root, for a read-only grant
// of root to leave out.
func Under(root string, ps []Path) []string {
	var out []string
	for _, p := range ps {
		if p.Path != root && within(p.Path, root) {
			out = append(out, p.Path)
		}
	}
	return out
}

func within(p, root string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
