//go:build linux

package notify

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Start serves listenerFD (Serve) on a goroutine for the life of a run and
// takes ownership of the descriptor, for every supervisor of a run alike.
// stop cancels the service, waits until it stopped and closed the
// descriptor; a listenerFD below zero (the run has no listener) serves
// nothing. A failure other than the cancel is printed on stderr: the run
// goes on without it, as the kernel then fails the notified calls.
func Start(listenerFD int, cfg Config) (stop func()) {
	if listenerFD < 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := Serve(ctx, listenerFD, cfg)
		unix.Close(listenerFD)
		if err != nil && !errors.Is(err, context.Canceled) {
			fmt.Fprintf(os.Stderr, "confine: notification supervisor: %v\n", err)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
