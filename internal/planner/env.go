package planner

// The run's environment and program as the run will find them, and the
// refusals every backend shares besides validate.go's.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/spec"
)

// ErrGuard wraps the persistence guard's refusals (with spec.ErrUnavailable):
// a work tree whose .git the guard cannot keep read-only as it is laid out.
var ErrGuard = errors.New("persistence guard")

func HasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func GetEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// LookPath resolves the program the way execvp would inside the run: a name
// without a slash is searched in the run's PATH, never the caller's.
func LookPath(prog, dir string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(dir, prog)
		}
		return prog, checkExec(prog)
	}
	for _, d := range strings.Split(GetEnv(env, "PATH"), ":") {
		if d == "" {
			continue
		}
		c := filepath.Join(d, prog)
		if err := checkExec(c); err == nil {
			return c, nil
		} else if !errors.Is(err, spec.ErrNotFound) {
			continue
		}
	}
	return "", fmt.Errorf("%w: %s: not found in PATH %q", spec.ErrNotFound, prog, GetEnv(env, "PATH"))
}

func checkExec(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", spec.ErrNotFound, p)
		}
		return fmt.Errorf("%w: %s: %v", spec.ErrNotExecutable, p, err)
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s: not an executable file", spec.ErrNotExecutable, p)
	}
	return nil
}

// CheckControl refuses a writable root that covers a control surface or
// lies inside one: Landlock cannot take a part of a writable directory
// back, and a command that may create the surface's path could plant a
// key or a symlink the host's confine would then use. No profile waives
// it.
func CheckControl(rw []string, ps []ctlpaths.Path) error {
	for _, r := range rw {
		if p, ok := ctlpaths.Overlap(r, ps); ok {
			return fmt.Errorf("%w: %s: its %s %s is inside writable root %s, where the command could reach it; choose a work directory (and --rw roots) that does not contain it",
				spec.ErrUnavailable, ControlGuarantee, p.What, p.Path, r)
		}
	}
	return nil
}

// ControlGuarantee names the rule in refusals (it is part of
// no-credential-files and no-foreign-unix-sockets in the ledger, and not
// waivable).
const ControlGuarantee = "confine's control plane"

// CanonicalDir is p with its symlinks resolved; it must be a directory.
func CanonicalDir(p string) (string, error) {
	c, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", err
	}
	st, err := os.Stat(c)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", fmt.Errorf("%s is not a directory", p)
	}
	return c, nil
}
