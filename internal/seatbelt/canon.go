package seatbelt

import (
	"errors"
	"fmt"
	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/spec"
	"path/filepath"
)

// ErrCanonical is returned for a path that cannot be canonicalised. The run
// then fails at set-up: an unresolved path in a profile would either grant
// nothing (blocking the work directory) or, for a deny rule, deny nothing.
var ErrCanonical = errors.New("cannot canonicalise path")

// Rewrite is one of macOS's top-level symlinks into /private. The kernel
// reports, and Seatbelt matches, the target: a profile that says /tmp
// grants nothing.
type Rewrite struct{ Link, Target string }

// rewrites are the symlinks every macOS has from / into /private. Canon
// refuses a result still under a Link: the resolver did not resolve it.
var rewrites = []Rewrite{
	{"/tmp", "/private/tmp"},
	{"/var", "/private/var"},
	{"/etc", "/private/etc"},
}

// Canon canonicalises paths as the macOS kernel resolves them.
type Canon struct {
	// Eval resolves every symlink in an absolute path that exists. Nil
	// means filepath.EvalSymlinks; tests inject one rooted in a
	// temporary tree.
	Eval func(string) (string, error)
}

// Path returns p with every symlink resolved.
func (c Canon) Path(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%w: %q is not absolute", ErrCanonical, p)
	}
	eval := c.Eval
	if eval == nil {
		eval = filepath.EvalSymlinks
	}
	// Not cleaned first: ".." after a symlink is the parent of its
	// target for the kernel, and for EvalSymlinks.
	r, err := eval(p)
	if err != nil {
		return "", fmt.Errorf("%w: %s: %v", ErrCanonical, p, err)
	}
	if !filepath.IsAbs(r) || filepath.Clean(r) != r {
		return "", fmt.Errorf("%w: %s resolved to %q", ErrCanonical, p, r)
	}
	for _, rw := range rewrites {
		if spec.Within(r, rw.Link) {
			return "", fmt.Errorf("%w: %s resolved to %s, still under %s (macOS resolves it to %s)", ErrCanonical, p, r, rw.Link, rw.Target)
		}
	}
	if err := CheckPath(r); err != nil {
		return "", err
	}
	return r, nil
}

// CredentialDenies returns the credential paths to deny under the
// canonical read root root (policy's list, cargo's files in a cargo home),
// whether they exist or not, and where one exists as a symlink, its
// canonical target too (a dotfile manager's link; the bytes live there).
func (c Canon) CredentialDenies(root string) []string {
	var out []string
	for _, rel := range credpath.Under(root) {
		p := filepath.Join(root, rel)
		out = append(out, p)
		if t, err := c.Path(p); err == nil && t != p {
			out = append(out, t)
		}
	}
	return out
}
