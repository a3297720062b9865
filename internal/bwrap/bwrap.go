//go:build linux

// Package bwrap is the bubblewrap layer of the bubblewrap provider: the
// bwrap command line the supervisor starts instead of cloning stage-2
// itself, and the probe that says whether bwrap can create its namespaces
// here.
//
// bwrap only builds the namespaces and the mount tree. Inside, the same
// confine binary (bound read-only at InitPath) runs as the PID namespace's
// init, as stage-2 does under the landlock+namespaces provider, and starts
// a stage-3 re-exec that applies the Landlock ruleset, rlimits,
// no_new_privs, the capability drop and the seccomp filter before it
// execs the command. Nothing of the core is replaced.
package bwrap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/confine-sandbox/confine/internal/plan"
)

// InitPath is where the confine binary is bound inside the sandbox, and so
// the argv[0] it runs with there (bwrap before 0.9 has no --argv0): a path
// no host has, so the bind never lands in a granted root.
const InitPath = "/.confine/confine-bwrap-init"

// Descriptors bwrap's child inherits (the outer bwrap process closes every
// descriptor above 2 once it has cloned the sandbox, so these reach the
// init alone): 3 plan, 4 status, 5 seccomp-listener socket and 6 exit pipe
// as for stage-2, then the run's real stderr (bwrap's own stderr is a pipe
// the supervisor reads its errors from) and the binary to bind.
const (
	StderrFD = 7
	ExeFD    = 8
)

// Ready is the byte the init writes on its exit pipe first thing: a status
// pipe that closes without it means bwrap failed before the init ran.
const Ready = 'R'

// Args returns bwrap's arguments (without argv[0]) for plan p, whose
// Namespaces say which directories get a private tmpfs. The sandbox's root
// is an empty tmpfs; only p's roots are bound into it, at their own paths
// (read-only, read-write, or as device nodes), so /tmp, /run and the rest
// of /dev do not exist there unless a root lies beneath them.
func Args(p *plan.Plan) []string {
	ns := p.Namespaces
	a := []string{
		// Every namespace, none re-added; --unshare-user makes the user
		// namespace mandatory (--unshare-all only tries it).
		"--unshare-all", "--unshare-user",
		"--die-with-parent", "--new-session",
		// Our init is pid 1: it reports a signal death and the
		// survivors exactly, and keeps the command off pid 1.
		"--as-pid-1",
		"--cap-drop", "ALL",
		"--clearenv",
		"--proc", "/proc",
	}
	if ns.Hostname != "" {
		a = append(a, "--hostname", ns.Hostname)
	}
	roots := allRoots(p)
	for _, d := range PrivateDirs(ns, roots) {
		a = append(a, "--perms", "1777", "--size", strconv.FormatInt(ns.TmpfsBytes, 10), "--tmpfs", d)
	}
	bound := map[string]bool{}
	var binds []bindOp
	add := func(paths []string, kind string) {
		for _, r := range paths {
			r = filepath.Clean(r)
			if within(r, "/proc") {
				continue // the fresh /proc has them
			}
			res, err := filepath.EvalSymlinks(r)
			if err != nil {
				continue // missing: optional, or Landlock refuses the run
			}
			binds = append(binds, bindOp{res, kind})
		}
	}
	add(p.Landlock.ReadExec, "--ro-bind")
	add(p.Landlock.ReadWrite, "--bind")
	add(p.Landlock.Devices, "--dev-bind")
	// Parents before children; an equal path keeps its strongest kind.
	sort.SliceStable(binds, func(i, j int) bool { return binds[i].path < binds[j].path })
	var done []bindOp
	for _, b := range binds {
		if covered(done, b) {
			continue
		}
		done = append(done, b)
		bound[b.path] = true
		a = append(a, b.kind, b.path, b.path)
	}
	// Symlinks on the way to a root (/bin -> usr/bin, /etc/resolv.conf ->
	// /run/...) are recreated, unless a bind already shows them.
	links := map[string]string{}
	for _, r := range roots {
		symlinks(filepath.Clean(r), links, 0)
	}
	var lp []string
	for l := range links {
		lp = append(lp, l)
	}
	sort.Strings(lp)
	for _, l := range lp {
		if inBinds(done, l) || within(l, "/proc") {
			continue
		}
		a = append(a, "--symlink", links[l], l)
	}
	// What /dev always has, as links into the process's own /proc.
	for l, t := range map[string]string{"/dev/fd": "/proc/self/fd", "/dev/stdin": "/proc/self/fd/0",
		"/dev/stdout": "/proc/self/fd/1", "/dev/stderr": "/proc/self/fd/2"} {
		if !inBinds(done, l) && links[l] == "" {
			a = append(a, "--symlink", t, l)
		}
	}
	return append(a, "--ro-bind-fd", strconv.Itoa(ExeFD), InitPath, "--", InitPath)
}

type bindOp struct{ path, kind string }

// covered says b adds nothing: it lies within a root bound before it with
// a kind at least as strong (a writable root inside a read-only one, or a
// device node, still needs its own bind).
func covered(done []bindOp, b bindOp) bool {
	for _, d := range done {
		if within(b.path, d.path) && (b.kind == "--ro-bind" || d.kind == b.kind || d.kind == "--bind" && b.kind != "--dev-bind") {
			return true
		}
	}
	return false
}

func inBinds(done []bindOp, p string) bool {
	for _, d := range done {
		if within(p, d.path) {
			return true
		}
	}
	return false
}

// symlinks records, as link -> target, the first symlink on the way to p
// and, recursively, those on the way to its target.
func symlinks(p string, out map[string]string, depth int) {
	if depth > 40 || !filepath.IsAbs(p) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(p, "/"), "/")
	cur := ""
	for i, part := range parts {
		cur += "/" + part
		st, err := os.Lstat(cur)
		if err != nil {
			return
		}
		if st.Mode()&os.ModeSymlink == 0 {
			continue
		}
		t, err := os.Readlink(cur)
		if err != nil {
			return
		}
		out[cur] = t
		abs := t
		if !filepath.IsAbs(t) {
			abs = filepath.Join(filepath.Dir(cur), t)
		}
		symlinks(filepath.Join(append([]string{abs}, parts[i+1:]...)...), out, depth+1)
		return
	}
}

func allRoots(p *plan.Plan) []string {
	return append(append(append([]string(nil), p.Landlock.ReadExec...), p.Landlock.ReadWrite...), p.Landlock.Devices...)
}

// PrivateDirs are the directories of ns.Private that get a private tmpfs:
// those not within a root (a root's own content stays as granted), as
// nsinit does. ns.Hide needs nothing: what is not bound does not exist.
func PrivateDirs(ns *plan.Namespaces, roots []string) []string {
	var out []string
	for _, d := range ns.Private {
		in := false
		for _, r := range roots {
			in = in || within(d, filepath.Clean(r))
		}
		if !in {
			out = append(out, d)
		}
	}
	return out
}

// WritablePrivate are the PrivateDirs the command may write: those with no
// root bound beneath them (Landlock follows paths through mount points, so
// a writable tmpfs would make every root inside it writable).
func WritablePrivate(ns *plan.Namespaces, roots []string) []string {
	var out []string
	for _, d := range PrivateDirs(ns, roots) {
		bound := false
		for _, r := range roots {
			r = filepath.Clean(r)
			bound = bound || r != d && within(r, d)
		}
		if !bound {
			out = append(out, d)
		}
	}
	return out
}

func within(p, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(p, "/")
	}
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// probeTarget is what the probe asks bwrap to exec: it does not exist, so
// bwrap's execvp error proves every step before it worked.
const probeTarget = "/nonexistent/confine-bwrap-probe"

// Probe runs bwrap with the options a run uses (every namespace, a fresh
// /proc, a sized private tmpfs, a device bind, a bind from a descriptor)
// and a program that does not exist: one bwrap start, no program start. It returns why bwrap
// cannot run sandboxes here, nil when it can.
func Probe(path string) error {
	cmd := exec.Command(path, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
		"--as-pid-1", "--cap-drop", "ALL", "--clearenv", "--proc", "/proc", "--hostname", "confine",
		"--perms", "1777", "--size", "1048576", "--tmpfs", "/dev/shm",
		"--dev-bind", "/dev/null", "/dev/null", "--symlink", "/proc/self/fd", "/dev/fd",
		"--ro-bind-fd", "3", InitPath,
		"--", probeTarget)
	cmd.Env = []string{}
	// Stands in for the binary a run binds (any file does).
	null, err := os.Open(os.DevNull)
	if err != nil {
		return err
	}
	defer null.Close()
	cmd.ExtraFiles = []*os.File{null}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if err != nil && strings.Contains(msg, "execvp "+probeTarget) {
		return nil
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return errors.New("bwrap ran a program that does not exist")
	case msg != "":
		return fmt.Errorf("%s", firstLine(msg))
	case errors.As(err, &ee):
		return fmt.Errorf("bwrap failed: %v", err)
	default:
		return fmt.Errorf("start bwrap: %w", err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
