package policy

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// checkPathComponent applies the path-list rules of seed 000 to one
// component: not empty (empty means "current directory"), no NUL, absolute
// and normalised, inside a read root, not inside a writable root of the run
// (a writable dir on PATH is a code-execution vector) and, after resolving
// symlinks, still inside a read root.
func checkPathComponent(c string, readRoots, writeRoots []string) error {
	if err := checkPathSyntax(c); err != nil {
		return err
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

// checkPathSyntax applies the rules of checkPathComponent that need no
// filesystem and no roots: not empty, no NUL, absolute and normalised. A
// profile loader uses it to reject a bad component before any run.
func checkPathSyntax(c string) error {
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
	return nil
}

// validatePathList checks every component of a path-list variable; one bad
// component fails the whole variable, and the error names the variable and
// the component. Components are split as the variable's consumer splits
// them (see pathListComponents).
func validatePathList(name, value string, readRoots, writeRoots []string) error {
	for _, c := range pathListComponents(name, value) {
		if err := checkPathComponent(c, readRoots, writeRoots); err != nil {
			return fmt.Errorf("%w: %s: %v", spec.ErrInvalidSpec, name, err)
		}
	}
	return nil
}

// pathListVars are the variables whose value is a list of directories (or
// files) a program searches for code, headers, libraries or data. Every one
// present in a run's environment is checked component by component with
// checkPathComponent (ValidateEnvPaths). The dynamic-loader entries
// (LD_LIBRARY_PATH, LD_PRELOAD, LD_AUDIT) are refused by the environment
// sanitiser anyway; they are listed so that a profile that waives one still
// gets every component checked.
//
// GOPATH is treated like the others: its components must be read roots and
// not writable. confine's Go builds keep the module cache read-only (offline,
// GOFLAGS=-mod=mod GOPROXY=off) and write only GOCACHE, which is a single
// directory and not a path list; a run that really needs a writable module
// cache sets GOMODCACHE (also a single directory, not checked here) to a
// writable root. GEM_HOME, GOCACHE, GOMODCACHE, CARGO_HOME and the like
// name one directory, not a search list, and are not checked.
//
// Treat the slice as read-only.
var pathListVars = []string{
	"PATH",
	"LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT",
	"PYTHONPATH", "PYTHONHOME",
	"NODE_PATH",
	"CLASSPATH",
	"PERL5LIB", "PERLLIB",
	"RUBYLIB",
	"GOPATH",
	"GEM_PATH",
	"MANPATH", "INFOPATH",
	"CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "OBJC_INCLUDE_PATH", "LIBRARY_PATH",
	"PKG_CONFIG_PATH", "PKG_CONFIG_LIBDIR", "ACLOCAL_PATH",
	"XDG_DATA_DIRS", "XDG_CONFIG_DIRS",
	"GCONV_PATH",
	"R_LIBS", "R_LIBS_USER", "R_LIBS_SITE",
	"JULIA_LOAD_PATH", "GUILE_LOAD_PATH", "OCAMLPATH",
}

// isPathListVar reports whether name is one of pathListVars (exact,
// case-sensitive: the programs that read these look them up that way).
func isPathListVar(name string) bool {
	for _, v := range pathListVars {
		if v == name {
			return true
		}
	}
	return false
}

// pathListComponents splits a path-list value the way its consumer does:
// on ':' for all of them, and on ':' or ' ' for LD_PRELOAD, whose empty
// entries ld.so skips (they do not mean the current directory, so they are
// dropped here; a value with no entry at all yields one empty component). A
// CLASSPATH component "DIR/*" (every jar in DIR) is returned as DIR. The
// result is never empty: "" yields one empty component.
func pathListComponents(name, value string) []string {
	var cs []string
	if name == "LD_PRELOAD" {
		cs = strings.FieldsFunc(value, func(r rune) bool { return r == ':' || r == ' ' })
		if len(cs) == 0 {
			cs = []string{""}
		}
	} else {
		cs = strings.Split(value, ":")
	}
	if name == "CLASSPATH" {
		for i, c := range cs {
			if d, ok := strings.CutSuffix(c, "/*"); ok && d != "" {
				cs[i] = d
			}
		}
	}
	return cs
}

// ValidateEnvPaths checks every pathListVars entry of env (NAME=VALUE) with
// validatePathList against the run's roots: readRoots are every read/exec
// root of the run (system roots included), writeRoots every writable root
// (work directory, private temp dir, granted writable roots). It reports
// every bad variable, each with its first bad component, and wraps
// spec.ErrInvalidSpec. Entries that are not NAME=VALUE are left to the
// environment sanitiser.
func ValidateEnvPaths(env []string, readRoots, writeRoots []string) error {
	var bad []string
	for _, kv := range env {
		name, val, ok := strings.Cut(kv, "=")
		if !ok || !isPathListVar(name) {
			continue
		}
		if err := validatePathList(name, val, readRoots, writeRoots); err != nil {
			bad = append(bad, strings.TrimPrefix(err.Error(), spec.ErrInvalidSpec.Error()+": "))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", spec.ErrInvalidSpec, strings.Join(bad, "; "))
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
		if checkPathComponent(c, readRoots, writeRoots) != nil {
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
