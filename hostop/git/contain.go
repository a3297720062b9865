//go:build linux

package git

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/spec"
)

// ErrOutside: something in .git would have git read a file outside the
// root (a symlink leading out, an alternate object store elsewhere).
// Every such error also wraps hostop.ErrSymlinkEscape.
var ErrOutside = errors.New("git metadata leads out of the root")

// maxAlternateDepth is how deep git follows alternates of alternates
// (object-file.c: 5).
const maxAlternateDepth = 5

// containGitDir checks, before git runs and again after, that nothing git
// may read under .git leaves the root: every symlink anywhere under .git
// (config, HEAD, index, packed-refs, refs/, logs/, objects/, info/,
// commondir, gitdir, ...) resolves beneath the root (hostop.CheckTree,
// the kernel resolving beneath the root), and every alternate object
// store objects/info/alternates names (and theirs) lies in the root with
// no symlink on the way.
func containGitDir(root *hostop.Root) error {
	p, err := root.ReadPath(".git")
	if err != nil {
		return err
	}
	if err := hostop.CheckTree(p); err != nil {
		return outside(err)
	}
	return containAlternates(root, ".git/objects", 0)
}

func outside(err error) error {
	if errors.Is(err, hostop.ErrSymlinkEscape) {
		return fmt.Errorf("%w: %w; git was not run", ErrOutside, err)
	}
	return err
}

// containAlternates checks the alternates file of the object store at
// objects (a path from the root).
func containAlternates(root *hostop.Root, objects string, depth int) error {
	p, err := root.ReadPath(objects + "/info/alternates")
	if err != nil {
		return err
	}
	res, err := hostop.Read(p, 1<<20)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return outside(err)
	case res.Content.Truncated:
		return fmt.Errorf("%s: %w", p.Rel(), hostop.ErrTooLarge)
	}
	if depth >= maxAlternateDepth {
		return fmt.Errorf("%w: %w: %s: alternates nested deeper than %d", ErrOutside, hostop.ErrSymlinkEscape, p.Rel(), maxAlternateDepth)
	}
	real, err := filepath.EvalSymlinks(root.Path())
	if err != nil {
		return err
	}
	for _, l := range strings.Split(string(res.Content.Head), "\n") {
		l = strings.TrimSpace(l)
		if l == "" || l[0] == '#' {
			continue
		}
		var rel string
		if filepath.IsAbs(l) {
			r, ok := strings.CutPrefix(filepath.Clean(l), real+"/")
			if !ok {
				r, ok = strings.CutPrefix(filepath.Clean(l), root.Path()+"/")
			}
			if !ok {
				return fmt.Errorf("%w: %w: %s names an object store outside the root", ErrOutside, hostop.ErrSymlinkEscape, p.Rel())
			}
			rel = r
		} else {
			rel = filepath.Clean(filepath.Join(objects, l))
		}
		if rel == ".." || strings.HasPrefix(rel, "../") || !spec.Within(filepath.Join(real, rel), real) {
			return fmt.Errorf("%w: %w: %s names an object store outside the root", ErrOutside, hostop.ErrSymlinkEscape, p.Rel())
		}
		ap, err := root.ReadPath(rel)
		if err != nil {
			return outside(err)
		}
		// The store itself: no symlink on the way to it (CheckTree
		// opens it with none), none in it leading out.
		if err := hostop.CheckTree(ap); err != nil && !errors.Is(err, fs.ErrNotExist) {
			if errors.Is(err, hostop.ErrSymlink) {
				return fmt.Errorf("%w: %w: %s names %s, reached through a symlink", ErrOutside, hostop.ErrSymlinkEscape, p.Rel(), rel)
			}
			return outside(err)
		}
		if err := containAlternates(root, rel, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// withheld are git's messages that quote what it read from a file, with
// the part to keep: whatever check let such a file through, its content
// never reaches the caller. Compiled on first use (lazyRE): every
// confine start would pay for them otherwise.
var withheld = []func() *regexp.Regexp{
	lazyRE(`^(.*unexpected line in [^:]*):.*$`),
	lazyRE(`^(.*(?:bad|invalid|unexpected|broken|malformed) [^:]*(?:content|line|contents)[^:]*):.*$`),
	lazyRE(`^(.*object directory) .* (does not exist; check .*alternates)$`),
}

// sanitize is git's stderr as the caller sees it: each line matching a
// withheld message keeps its prefix only, control characters are
// escaped, and the shadow directory's path reads ".git".
func sanitize(b []byte, shadowDir string) []byte {
	if len(b) == 0 {
		return b
	}
	lines := bytes.SplitAfter(b, []byte("\n"))
	var out bytes.Buffer
	for _, l := range lines {
		nl := bytes.HasSuffix(l, []byte("\n"))
		s := strings.TrimSuffix(string(l), "\n")
		if shadowDir != "" {
			s = strings.ReplaceAll(s, shadowDir, ".git")
		}
		for _, re := range withheld {
			if m := re().FindStringSubmatchIndex(s); m != nil {
				keep := s[m[2]:m[3]]
				if len(m) > 4 && m[4] >= 0 {
					keep += " [...] " + s[m[4]:m[5]]
				} else {
					keep += ": [content withheld: it may come from outside the root]"
				}
				s = keep
				break
			}
		}
		for _, r := range s {
			switch {
			case r == '\t' || (r >= 0x20 && r != 0x7f):
				out.WriteRune(r)
			default:
				fmt.Fprintf(&out, "\\x%02x", r)
			}
		}
		if nl {
			out.WriteByte('\n')
		}
	}
	return out.Bytes()
}
