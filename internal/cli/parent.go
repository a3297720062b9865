//go:build linux || darwin

package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// errParentExited is the cause of a run ended by --die-with-parent.
var errParentExited = errors.New("the parent process exited (--die-with-parent)")

// watchParent returns a context that is cancelled, with errParentExited
// as its cause, when this process's parent exits, and a function that
// stops watching. A caller such as an agent or the Python client that is
// killed with SIGKILL cannot end its run itself; without this the run
// goes on, within its limits, until the command ends. The watch is on
// the parent process, not on the thread that forked this one (as
// PR_SET_PDEATHSIG would be), so a caller that started confine from a
// thread that has since ended does not end the run.
//
// how says how the parent is watched (a pidfd, or polling getppid()).
func watchParent(ctx context.Context) (_ context.Context, unwatch func(), how string, _ error) {
	ppid := os.Getppid()
	if ppid == 0 {
		// Started from outside this PID namespace (docker exec, nsenter):
		// there is no parent to watch.
		return nil, nil, "", fmt.Errorf("--die-with-parent: the parent process is outside this PID namespace (getppid() is 0), so its exit cannot be seen")
	}
	ctx, cancel := context.WithCancelCause(ctx)
	wait, err := parentWaiter(ppid)
	if err != nil {
		cancel(nil)
		return nil, nil, "", fmt.Errorf("--die-with-parent: %w", err)
	}
	how = fmt.Sprintf("watching parent %d %s", ppid, wait)
	// Opened before this check: if the parent had already gone, this
	// process was reparented first and getppid() no longer names it.
	if os.Getppid() != ppid {
		wait.release()
		cancel(errParentExited)
		return ctx, func() {}, how, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if wait.wait() {
			cancel(errParentExited)
		}
	}()
	return ctx, func() {
		wait.stop()
		<-done
		wait.release()
		cancel(nil)
	}, how, nil
}
