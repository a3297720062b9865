package confine

// What every OS's RunCommand shares: limits, and resolving the program as
// the run will.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// mergeLimits is the run's limits: the spec's where set, else the
// profile's, else the defaults; memory's default is the host's
// (defaultMemory), not a fixed size.
func mergeLimits(prof, s spec.Limits) spec.Limits {
	l := prof.WithDefaults()
	if prof.MemoryBytes == 0 && s.MemoryBytes == 0 {
		l.MemoryBytes = defaultMemory(l.MemoryBytes)
	}
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	setD(&l.WallTime, s.WallTime)
	setD(&l.CPUTime, s.CPUTime)
	setD(&l.KillGrace, s.KillGrace)
	set(&l.MemoryBytes, s.MemoryBytes)
	set(&l.MaxProcs, s.MaxProcs)
	set(&l.FileSizeBytes, s.FileSizeBytes)
	set(&l.OpenFiles, s.OpenFiles)
	set(&l.OutputBytes, s.OutputBytes)
	return l
}

func hasEnv(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func getEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// lookPath resolves the program the way execvp would inside the run: a name
// without a slash is searched in the run's PATH, never the caller's.
func lookPath(prog, dir string, env []string) (string, error) {
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(dir, prog)
		}
		return prog, checkExec(prog)
	}
	for _, d := range strings.Split(getEnv(env, "PATH"), ":") {
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
	return "", fmt.Errorf("%w: %s: not found in PATH %q", spec.ErrNotFound, prog, getEnv(env, "PATH"))
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
