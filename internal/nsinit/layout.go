//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
)

// Kind is how a root is bound into the new root.
type Kind uint8

const (
	// ReadOnly roots are bound read-only (Landlock grants read and
	// execute there at most).
	ReadOnly Kind = iota
	// ReadWrite roots are bound writable.
	ReadWrite
	// Device roots are character devices, bound writable.
	Device
	// Guarded paths lie inside a writable root and are bound read-only
	// over themselves (the persistence guard's .git): a mount point the
	// command can neither write into, rename nor remove.
	Guarded
)

// BindPath is a root bound at its own path (symlinks resolved) into the
// new root.
type BindPath struct {
	Path string
	Dir  bool
	Kind Kind
}

// Cover is a directory that gets a private tmpfs in the new root.
type Cover struct {
	dir   string
	bound bool // roots were bound beneath it
}

// Dir is the covered directory.
func (c Cover) Dir() string { return c.dir }

// Writable says the command may write the tmpfs: no root is bound
// beneath it. Landlock rules follow the path through mount points, so a
// writable tmpfs would make every root inside it writable too.
func (c Cover) Writable() bool { return !c.bound }

// TmpfsOptions are the mount options of a private tmpfs.
func TmpfsOptions(ns *plan.Namespaces) string {
	return fmt.Sprintf("mode=1777,size=%d,nr_inodes=65536", ns.TmpfsBytes)
}

// RootTmpfsOptions are those of the new root itself, which holds only the
// directories and files the binds are mounted on.
const RootTmpfsOptions = "mode=0755,size=1048576,nr_inodes=16384"

// Layout is the mount namespace's tree, decided without mounting anything:
// an empty tmpfs root that holds only the run's roots, bound at their own
// paths, the symlinks on the way to them, the private tmpfs directories,
// the /dev links every program expects, and a /proc of the new PID
// namespace. Nothing else of the host exists in it: what Landlock would
// refuse to open cannot even be listed or stat()ed.
type Layout struct {
	// Stage is the host directory the new root's tmpfs is mounted on
	// while it is being filled (it is the root afterwards); see FindStage.
	Stage string
	// Private are the tmpfs directories, mounted before the binds.
	Private []Cover
	// Binds, parents first.
	Binds []BindPath
	// Links are [link, target] pairs, sorted.
	Links [][2]string
}

// stages are where the new root may be assembled: any existing real
// directory does, the tmpfs mounted on it is private to the namespace.
var stages = []string{"/tmp", "/mnt", "/dev"}

// devLinks are the /dev entries every program may expect, as links into
// the process's own /proc.
var devLinks = [][2]string{
	{"/dev/fd", "/proc/self/fd"}, {"/dev/stdin", "/proc/self/fd/0"},
	{"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"},
}

// ErrNoStage is returned when no directory to assemble the new root on
// exists.
var ErrNoStage = errors.New("no directory to assemble the mount namespace's root on (" + strings.Join(stages, ", ") + ")")

// FindStage returns the directory to assemble the new root on.
func FindStage() (string, error) {
	for _, s := range stages {
		var st unix.Stat_t
		if unix.Lstat(s, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return s, nil
		}
	}
	return "", ErrNoStage
}

// PlanLayout computes the Layout (without its Stage) of a plan with
// namespaces from the plan's own data: its Landlock roots by kind, its
// guarded paths and its namespaces' private directories. resolve returns
// a root with its symlinks resolved ("" when it does not exist) and
// whether it is a directory (nil: find out here). Roots under /proc are
// left out: the new /proc has its own.
func PlanLayout(p *plan.Plan, resolve func(string) (string, bool)) Layout {
	if resolve == nil {
		resolve = resolved
	}
	var l Layout
	var binds []BindPath
	links := map[string]string{}
	var all []string
	add := func(paths []string, k Kind) {
		for _, given := range paths {
			p := filepath.Clean(given)
			if within(p, "/proc") {
				continue
			}
			all = append(all, p)
			res, dir := resolve(given)
			if res == "" {
				continue // missing: optional, or Landlock refused the run
			}
			if res != p {
				symlinks(p, links, 0)
			}
			binds = append(binds, BindPath{Path: res, Dir: dir, Kind: k})
		}
	}
	add(p.Landlock.ReadExec, ReadOnly)
	add(p.Landlock.ReadWrite, ReadWrite)
	add(p.Landlock.Devices, Device)
	for _, g := range p.Guarded {
		// Canonical and checked when the plan was made. Gone since, it
		// is bound all the same: the clone of its mount then fails and so
		// does the run, rather than running unguarded.
		res, dir := resolved(g)
		if res == "" {
			res, dir = filepath.Clean(g), true
		}
		all = append(all, res)
		binds = append(binds, BindPath{Path: res, Dir: dir, Kind: Guarded})
	}
	sort.SliceStable(binds, func(i, j int) bool { return binds[i].Path < binds[j].Path })
	for _, b := range binds {
		if !covered(l.Binds, b) {
			l.Binds = append(l.Binds, b)
		}
	}
	for _, d := range p.Namespaces.Private {
		in := false
		for _, p := range all {
			in = in || within(d, p)
		}
		if !in {
			l.Private = append(l.Private, Cover{dir: d})
		}
	}
	for _, dl := range devLinks {
		if links[dl[0]] == "" {
			links[dl[0]] = dl[1]
		}
	}
	for link, target := range links {
		if !l.shows(link) && !within(link, "/proc") {
			l.Links = append(l.Links, [2]string{link, target})
		}
	}
	sort.Slice(l.Links, func(i, j int) bool { return l.Links[i][0] < l.Links[j][0] })
	for i := range l.Private {
		for _, b := range l.Binds {
			l.Private[i].bound = l.Private[i].bound || b.Path != l.Private[i].dir && within(b.Path, l.Private[i].dir)
		}
		for _, lk := range l.Links {
			l.Private[i].bound = l.Private[i].bound || within(lk[0], l.Private[i].dir)
		}
	}
	return l
}

// WritablePrivate are the private directories the command may write.
func (l Layout) WritablePrivate() []string {
	var out []string
	for _, c := range l.Private {
		if c.Writable() {
			out = append(out, c.dir)
		}
	}
	return out
}

// shows says p lies within a bind.
func (l Layout) shows(p string) bool {
	for _, b := range l.Binds {
		if within(p, b.Path) {
			return true
		}
	}
	return false
}

// Shows says the resolved path p exists in the new root: it lies within a
// bind.
func (l Layout) Shows(p string) bool { return l.shows(p) }

// covered says b adds nothing to binds: it lies within one at least as
// strong (a writable root within a read-only one, or a device node
// within anything but a device bind, still needs its own).
func covered(binds []BindPath, b BindPath) bool {
	for _, d := range binds {
		if b.Kind != Guarded && within(b.Path, d.Path) && (b.Kind == ReadOnly || d.Kind == b.Kind || d.Kind == Device) {
			return true
		}
	}
	return false
}

// symlinks records, as link -> target, the first symlink on the way to p
// and, recursively, those on the way to its target.
func symlinks(p string, out map[string]string, depth int) {
	if depth > 40 || !filepath.IsAbs(p) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for i, part := range parts {
		cur += "/" + part
		var st unix.Stat_t
		if unix.Lstat(cur, &st) != nil {
			return
		}
		if st.Mode&unix.S_IFMT != unix.S_IFLNK {
			continue
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return
		}
		out[cur] = t
		abs := t
		if !filepath.IsAbs(t) {
			abs = filepath.Join(filepath.Dir(cur), t)
		}
		symlinks(filepath.Join(append([]string{abs}, parts[i+1:]...)...), out, depth+1)
		return
	}
}

// resolved is p with every symlink resolved, or "" when it does not
// exist, and whether it is a directory.
func resolved(p string) (string, bool) {
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	var st unix.Stat_t
	if unix.Stat(r, &st) != nil {
		return "", false
	}
	return r, st.Mode&unix.S_IFMT == unix.S_IFDIR
}

// within reports whether p is dir or lies beneath it.
func within(p, dir string) bool {
	if dir == "" {
		return false
	}
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Parents are the directories from / down to p's parent, outermost first
// (without /).
func Parents(p string) []string {
	var out []string
	for i := 1; i < len(p); i++ {
		if p[i] == '/' {
			out = append(out, p[:i])
		}
	}
	return out
}
