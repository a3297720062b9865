package planner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// outsideView turns a program the run cannot find or execute into a
// hinted refusal (spec.Hinted) when the program exists on the host
// outside every granted root (found as the caller would find it: by its
// path, or in the caller's PATH): the fix is a --ro of its directory. A
// program inside roots (every root the run has) failed for another reason and keeps err.
func outsideView(prog, dir, callerPATH string, roots []string, err error) error {
	if !errors.Is(err, spec.ErrNotFound) && !errors.Is(err, spec.ErrNotExecutable) {
		return err
	}
	host := hostProgram(prog, dir, callerPATH)
	if host == "" {
		return err
	}
	real, rerr := filepath.EvalSymlinks(host)
	if rerr != nil {
		return err
	}
	var grants []string
	for _, d := range []string{filepath.Dir(host), filepath.Dir(real)} {
		if !slices.ContainsFunc(roots, func(r string) bool { return spec.Within(d, r) }) && !slices.Contains(grants, "--ro "+d) {
			grants = append(grants, "--ro "+d)
		}
	}
	if slices.ContainsFunc(roots, func(r string) bool { return spec.Within(real, r) }) || len(grants) == 0 {
		return err
	}
	errno := "ENOENT"
	if errors.Is(err, spec.ErrNotExecutable) {
		errno = "EACCES"
	}
	return &spec.Hinted{Err: err, Denial: spec.Denial{Syscall: "execve", Path: host, Errno: errno,
		Reason: host + " exists on the host, outside the sandbox's read roots", Hint: strings.Join(grants, " ")}}
}

// hostProgram is the executable regular file prog names on the host: a
// path (relative to dir), or the first match in path (the caller's PATH,
// not the run's); "" when there is none.
func hostProgram(prog, dir, path string) string {
	var cands []string
	switch {
	case strings.Contains(prog, "/") && filepath.IsAbs(prog):
		cands = []string{prog}
	case strings.Contains(prog, "/"):
		cands = []string{filepath.Join(dir, prog)}
	default:
		for _, d := range filepath.SplitList(path) {
			if filepath.IsAbs(d) {
				cands = append(cands, filepath.Join(d, prog))
			}
		}
	}
	for _, c := range cands {
		if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return filepath.Clean(c)
		}
	}
	return ""
}
