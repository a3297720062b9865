//go:build linux

// Package bwrap is the bubblewrap layer of the bubblewrap provider: the
// bwrap command line the supervisor starts instead of cloning the run's init
// itself, and the probe that says whether bwrap can create its namespaces
// here.
//
// bwrap only builds the namespaces and the mount tree. Inside, the same
// confine binary (bound read-only at InitPath) runs as the PID namespace's
// init, as the launcher's init does under landlock+namespaces, and starts
// a re-exec that applies the Landlock ruleset, rlimits,
// no_new_privs, the capability drop and the seccomp filter before it
// execs the command. Nothing of the core is replaced.
package bwrap

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
)

// InitPath is where the confine binary is bound inside the sandbox, and so
// the argv[0] it runs with there (bwrap before 0.9 has no --argv0): a path
// no host has, so the bind never lands in a granted root.
const InitPath = "/.confine/confine-bwrap-init"

// Descriptors bwrap's child inherits (the outer bwrap process closes every
// descriptor above 2 once it has cloned the sandbox, so these reach the
// init alone): 3 plan, 4 status, 5 seccomp-listener socket and 6 exit pipe
// as for the run's init, then the run's real stderr (bwrap's own stderr is a pipe
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
	l := nsinit.PlanLayout(p, nil)
	for _, c := range l.Private {
		a = append(a, "--perms", "1777", "--size", strconv.FormatInt(ns.TmpfsBytes, 10), "--tmpfs", c.Dir())
	}
	for _, b := range l.Binds {
		a = append(a, bindOption[b.Kind], b.Path, b.Path)
	}
	for _, lk := range l.Links {
		a = append(a, "--symlink", lk[1], lk[0])
	}
	return append(a, "--ro-bind-fd", strconv.Itoa(ExeFD), InitPath, "--", InitPath)
}

var bindOption = map[nsinit.Kind]string{nsinit.ReadOnly: "--ro-bind", nsinit.ReadWrite: "--bind", nsinit.Device: "--dev-bind", nsinit.Guarded: "--ro-bind"}

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
