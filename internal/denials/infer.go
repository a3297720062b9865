//go:build linux

package denials

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/spec"
)

// maxInferred bounds the denials Infer adds to one result.
const maxInferred = 16

// Roots are what a run was granted: its writable roots (resolved), its
// read-only roots, and the credential files it hid.
type Roots struct{ RW, RO, Hidden []string }

// Infer adds to res the refusals the kernel made on its own
// (Landlock's EACCES, the read-only mount tree's EROFS, a path missing
// from the sandbox's view) that the command's error messages name
// (refusalsIn), with the grant that allows each: --rw of the nearest
// existing directory for a write outside the writable roots, --ro of the
// directory for a path that exists on the host outside every granted
// root. A path inside the grants, a path that exists nowhere, and the
// credential files the run hides are left alone: no grant is the fix.
func Infer(in Roots, res *spec.CommandResult) {
	const seen = " (named in the command's error message; the kernel refused it)"
	text := string(res.Stderr.Head) + "\n" + string(res.Stderr.Tail)
	writable := func(p string) bool {
		return slices.ContainsFunc(in.RW, func(r string) bool { return spec.Within(p, r) })
	}
	readable := func(p string) bool {
		return writable(p) || slices.ContainsFunc(in.RO, func(r string) bool { return spec.Within(p, r) })
	}
	n := 0
	for _, r := range refusalsIn(text) {
		if n == maxInferred {
			return
		}
		if writable(r.path) || slices.ContainsFunc(in.Hidden, func(h string) bool { return spec.Within(r.path, h) }) || credentialLike(r.path) {
			continue
		}
		st, err := os.Stat(r.path)
		exists := err == nil
		parent := filepath.Dir(r.path)
		pst, perr := os.Stat(parent)
		parentDir := perr == nil && pst.IsDir() && parent != "/"
		write := func(dir string) spec.Denial {
			return spec.Denial{Syscall: "write", Path: r.path, Errno: r.errno, Reason: "outside the writable roots" + seen, Hint: "--rw " + dir}
		}
		var d spec.Denial
		switch {
		case exists && !readable(r.path):
			// Outside the view, whatever the call: reading it needs --ro.
			dir := r.path
			if !st.IsDir() {
				dir = parent
			}
			d = spec.Denial{Syscall: "open", Path: r.path, Errno: r.errno, Reason: "exists on the host, outside the sandbox's read roots" + seen,
				Hint: "--ro " + dir}
		case r.errno == "EROFS" || r.errno == "EACCES":
			// A write (or a new file) in a read-only or ungranted place.
			dir := existingDir(parent)
			if dir == "" || dir == "/" {
				continue
			}
			d = write(dir)
		case r.errno == "ENOENT" && !exists && parentDir && !readable(parent):
			// A new file in a directory the sandbox does not show.
			d = write(parent)
		default:
			// Inside the grants, or missing on the host too.
			continue
		}
		res.Denials = append(res.Denials, d)
		n++
	}
}

// credentialLike reports whether p is, or lies in, one of the paths that
// hold credentials (credpath.Under: a home's .ssh, .netrc,
// ..., a cargo home's credentials) wherever it is: never a grant to
// suggest.
func credentialLike(p string) bool {
	return slices.ContainsFunc(credpath.Under(filepath.Dir(p)), func(c string) bool {
		return strings.Contains(p+"/", "/"+c+"/")
	})
}

// existingDir is dir or its nearest ancestor that exists on the host as a
// directory ("" for none).
func existingDir(dir string) string {
	for {
		if st, err := os.Stat(dir); err == nil && st.IsDir() {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
