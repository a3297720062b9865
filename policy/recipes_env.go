package policy

import (
	"crypto/sha256"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strings"
)

// LookupIn is Lookup with a recipe's toolchain discovered in environ, the
// caller's environment as NAME=VALUE entries (its PATH finds the tools, and
// they run with it), rather than in this process's: for a server that runs
// other processes' requests (confine serve). Results are kept per recipe
// and environment.
func LookupIn(name string, environ []string) (Profile, error) {
	r, ok := recipes[name]
	if !ok {
		return Lookup(name)
	}
	sorted := slices.Clone(environ)
	slices.Sort(sorted)
	return r.resolveIn(sha256.Sum256([]byte(strings.Join(sorted, "\x00"))), hostIn(environ))
}

// ResolveProfileIn is ResolveProfile with recipes discovered in environ
// (LookupIn).
func ResolveProfileIn(nameOrPath string, environ []string) (Profile, error) {
	if _, ok := recipes[nameOrPath]; ok {
		return LookupIn(nameOrPath, environ)
	}
	return ResolveProfile(nameOrPath)
}

// IsRecipe reports whether name is a toolchain recipe, whose profile
// depends on the environment it is discovered in.
func IsRecipe(name string) bool { return isRecipe(name) }

// hostIn is realHost with environ for this process's environment.
func hostIn(environ []string) *toolHost {
	get := func(name string) string {
		for i := len(environ) - 1; i >= 0; i-- {
			if n, v, ok := strings.Cut(environ[i], "="); ok && n == name {
				return v
			}
		}
		return ""
	}
	return &toolHost{
		lookPath: func(prog string) (string, error) { return lookPathIn(get("PATH"), prog) },
		run: func(extraEnv []string, prog string, args ...string) ([]byte, error) {
			return runToolIn(environ, extraEnv, prog, args...)
		},
		getenv: get,
		home: func() string {
			if h := get("HOME"); filepath.IsAbs(h) {
				return filepath.Clean(h)
			}
			if u, err := user.Current(); err == nil {
				return u.HomeDir
			}
			return ""
		},
		passwdHome: realHost.passwdHome,
	}
}

// lookPathIn is exec.LookPath with path for $PATH: the first executable
// regular file named prog in an absolute entry (a relative entry would be
// this process's working directory, not the caller's).
func lookPathIn(path, prog string) (string, error) {
	if strings.Contains(prog, "/") {
		return prog, nil
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}
