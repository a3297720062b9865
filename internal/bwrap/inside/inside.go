//go:build linux

// Package inside is our init inside bubblewrap: bwrap makes the
// namespaces and the mount tree, then execs this binary (bwrap.InitPath)
// as pid 1 of the run's PID namespace. The init starts the command as its
// child with the prepared program of package program (ForBwrap): the same
// confinement as every other run, made of raw system calls in a cloned
// child before it execs. Then it stays as a tiny init (see initMain).
//
// Any failure before the command exec'd is reported on fd 4 as "CODE
// message" and the command never starts.
package inside

import (
	"fmt"
	"os"
	"runtime"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/bwrap"
	"github.com/confine-sandbox/confine/internal/plan"
)

// Main runs the init with the plan read from fd 3 and returns its exit
// status once the command is over.
func Main() int {
	// The command's PR_SET_PDEATHSIG follows the thread that forks it.
	runtime.LockOSThread()
	if os.Args[0] != bwrap.InitPath {
		fmt.Fprintf(os.Stderr, "confine: bubblewrap's init started as %q\n", os.Args[0])
		return 125
	}
	if err := bwrapInit(); err != nil {
		fmt.Fprintf(os.NewFile(4, "status"), "%d %v", 125, err)
		return 125
	}
	status := os.NewFile(4, "status")
	if status == nil {
		return 125
	}
	unix.CloseOnExec(4)
	in := os.NewFile(3, "plan")
	p, err := plan.Read(in)
	in.Close()
	if err != nil {
		fmt.Fprintf(status, "%d %v", 125, err)
		return 125
	}
	if p.Backend != plan.BackendBwrap {
		fmt.Fprintf(status, "%d %s", 125, "bubblewrap's init started for a plan without bubblewrap")
		return 125
	}
	return initMain(p, status)
}

// bwrapInit prepares the descriptors bwrap handed over (see package
// bwrap): the run's stderr back on fd 2 (fd 2 was bwrap's error pipe), the
// ready byte on the exit pipe, and everything above the exit pipe (the
// bound binary's descriptor) closed at exec.
func bwrapInit() error {
	if err := unix.Dup2(bwrap.StderrFD, 2); err != nil {
		return fmt.Errorf("bubblewrap init: stderr: %w", err)
	}
	if _, err := unix.Write(6, []byte{bwrap.Ready}); err != nil {
		return fmt.Errorf("bubblewrap init: exit pipe: %w", err)
	}
	if err := unix.CloseRange(bwrap.StderrFD, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return fmt.Errorf("bubblewrap init: %w", err)
	}
	return nil
}
