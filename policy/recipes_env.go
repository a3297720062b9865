package policy

import (
	"crypto/sha256"
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
		return lookupProfile(name)
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
