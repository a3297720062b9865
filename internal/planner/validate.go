package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// The checks CheckRun (check.go) is made of: every OS's launch applies
// them to a run's roots and environment through it.

// CheckWritableRoots applies the rules for the run's writable roots
// (canonical paths), whoever asked for them (profile, --rw, --workdir,
// library callers): unless the profile waives fs-write-confined, none is,
// contains or lies inside a system directory (policy.CheckWritableRoot);
// unless it waives credentials, none holds a credential file, because
// read access cannot be taken back from part of a directory the command
// may write, so the secret could not be hidden.
func CheckWritableRoots(rw, waive []string) error {
	if !slices.Contains(waive, spec.GFSWrite) {
		for _, r := range rw {
			if err := policy.CheckWritableRoot(r); err != nil {
				return err
			}
		}
	}
	if !slices.Contains(waive, spec.GCredentials) {
		for _, r := range rw {
			if found := credpath.Find(r); len(found) > 0 {
				return fmt.Errorf("%w: %s: %s is inside writable root %s, where it cannot be hidden from the command; move it out or waive %s in the profile",
					spec.ErrUnavailable, spec.GCredentials, strings.Join(found, ", "), r, spec.GCredentials)
			}
		}
	}
	return nil
}

// CommandEnv builds the command's environment and finds its program, with
// the same rules for library callers as for the CLI: refused variables are
// errors (envWaive lifts some), path-list variables are checked component
// by component against the read-only roots ro and writable roots rw, PATH
// (unless s sets one) keeps the components of callerPATH those rules
// allow, and GIT_CONFIG_NOSYSTEM=1 is set (the system gitconfig is not
// granted: it may hold credential helpers, and without it git refuses to
// start). It returns the environment, the PATH components left out, and
// the program as the run will find it from dir. HOME and TMPDIR come later,
// with the private directory.
func CommandEnv(s *spec.CommandSpec, envWaive, ro, rw []string, callerPATH, dir string) (env, omitted []string, prog string, err error) {
	env, err = policy.SanitizeEnv(s.Env, envWaive)
	if err != nil {
		return nil, nil, "", err
	}
	if err := policy.ValidateEnvPaths(env, ro, rw); err != nil {
		return nil, nil, "", err
	}
	if !HasEnv(env, "PATH") {
		var path string
		path, omitted = policy.DerivePATH(callerPATH, ro, rw)
		env = append(env, "PATH="+path)
	}
	if !HasEnv(env, "GIT_CONFIG_NOSYSTEM") {
		env = append(env, "GIT_CONFIG_NOSYSTEM=1")
	}
	prog, err = LookPath(s.Program, dir, env)
	return env, omitted, prog, err
}
