package policy

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// CheckPathComponent applies the path-list rules of seed 000 to one
// component: not empty (empty means "current directory"), no NUL, absolute
// and normalised, inside a read root, not inside a writable root of the run
// (a writable dir on PATH is a code-execution vector) and, after resolving
// symlinks, still inside a read root.
func CheckPathComponent(c string, readRoots, writeRoots []string) error {
	switch {
	case c == "":
		return fmt.Errorf("empty component (means the current directory)")
	case strings.IndexByte(c, 0) >= 0:
		return fmt.Errorf("component %q contains NUL", c)
	case !filepath.IsAbs(c):
		return fmt.Errorf("component %q is relative", c)
	case filepath.Clean(c) != c:
		return fmt.Errorf("component %q is not normalised", c)
	}
	if under(c, writeRoots) {
		return fmt.Errorf("component %q is writable by the run", c)
	}
	if !under(c, readRoots) {
		return fmt.Errorf("component %q is outside the read roots", c)
	}
	real, err := filepath.EvalSymlinks(c)
	if err != nil {
		return fmt.Errorf("component %q does not resolve: %v", c, err)
	}
	if real != c && (under(real, writeRoots) || !under(real, readRoots)) {
		return fmt.Errorf("component %q resolves to %q outside the read roots", c, real)
	}
	return nil
}

// ValidatePathList checks every component of a path-list variable; one bad
// component fails the whole variable.
func ValidatePathList(name, value string, readRoots, writeRoots []string) error {
	for _, c := range strings.Split(value, ":") {
		if err := CheckPathComponent(c, readRoots, writeRoots); err != nil {
			return fmt.Errorf("%w: %s: %v", spec.ErrInvalidSpec, name, err)
		}
	}
	return nil
}

// DerivePATH keeps the caller's PATH components that pass the rules and
// returns the ones it left out, so everyday commands find the caller's
// toolchains without a writable or foreign directory on PATH.
func DerivePATH(callerPATH string, readRoots, writeRoots []string) (string, []string) {
	var kept, omitted []string
	seen := map[string]bool{}
	for _, c := range strings.Split(callerPATH, ":") {
		if seen[c] {
			continue
		}
		seen[c] = true
		if CheckPathComponent(c, readRoots, writeRoots) != nil {
			omitted = append(omitted, c)
			continue
		}
		kept = append(kept, c)
	}
	if len(kept) == 0 {
		kept = []string{"/usr/bin", "/bin"}
	}
	return strings.Join(kept, ":"), omitted
}

func under(p string, roots []string) bool {
	for _, r := range roots {
		if spec.Within(p, r) {
			return true
		}
	}
	return false
}
