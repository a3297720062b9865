//go:build linux

package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// errNoMemory: the server's request memory stayed taken until the
// request's deadline.
var errNoMemory = errors.New("the confine server's request memory is taken")

// byteSem hands out bytes of a fixed budget: the requests the server
// holds, together, never exceed it. A request that does not fit waits;
// any request that fits may go first (no head-of-line blocking of small
// requests behind a large one).
type byteSem struct {
	mu      sync.Mutex
	free    int64
	changed chan struct{}
}

func newByteSem(n int64) *byteSem {
	return &byteSem{free: n, changed: make(chan struct{})}
}

// acquire takes n bytes, waiting until deadline (or ctx's end) for them,
// and returns the function that gives them back (once).
func (b *byteSem) acquire(ctx context.Context, n int64, deadline time.Time) (func(), error) {
	var timer *time.Timer
	for {
		b.mu.Lock()
		if b.free >= n {
			b.free -= n
			b.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { b.put(n) }) }, nil
		}
		changed := b.changed
		b.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			return nil, fmt.Errorf("%w: no room for a request of %d bytes before its deadline", errNoMemory, n)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (b *byteSem) put(n int64) {
	b.mu.Lock()
	b.free += n
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
}

// readBody reads exactly size bytes from r into a buffer that grows as
// they arrive (a client that claims a size and sends nothing costs
// nothing) and never beyond size.
func readBody(r io.Reader, size int) ([]byte, error) {
	b := make([]byte, 0, min(size, 64<<10))
	for len(b) < size {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(2*cap(b), size))
			copy(nb, b)
			b = nb
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil && len(b) < size {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return b, nil
}

// deadlineWriter writes to f (a client's stdout or stderr, passed with
// its request), waiting at most timeout for each chunk to go: a client
// that leaves it unread that long gets an error, and stall is called (the
// server ends the run). Any error is final: later writes return it. The descriptor's mode is left as the client set
// it (never made non-blocking: it may be the client's terminal). nil
// when f is.
func deadlineWriter(f *os.File, timeout time.Duration, stall func()) io.Writer {
	if f == nil {
		return nil
	}
	return &stallWriter{f: f, timeout: timeout, stall: stall}
}

type stallWriter struct {
	f       *os.File
	timeout time.Duration
	stall   func()
	mu      sync.Mutex
	dead    error
}

// chunk is what one write may carry after poll said the descriptor
// takes data: a pipe's atomic size, which a pipe with room takes whole.
const chunk = 4096

func (w *stallWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return 0, w.dead
	}
	rc, err := w.f.SyscallConn()
	if err != nil {
		return 0, err
	}
	written := 0
	var werr error
	stalled := false
	cerr := rc.Control(func(fd uintptr) {
		deadline := time.Now().Add(w.timeout)
		for written < len(p) {
			left := time.Until(deadline)
			if left <= 0 {
				werr = fmt.Errorf("%s: the client read none of its output for %v", w.f.Name(), w.timeout)
				stalled = true
				return
			}
			pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
			n, err := unix.Poll(pfd, int(left/time.Millisecond)+1)
			if errors.Is(err, unix.EINTR) || (err == nil && n == 0) {
				continue
			}
			if err != nil {
				werr = err
				return
			}
			m, err := unix.Write(int(fd), p[written:min(len(p), written+chunk)])
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil {
				werr = err
				return
			}
			written += m
			// Progress restarts the clock: the bound is on a stalled
			// reader, not on a long output.
			deadline = time.Now().Add(w.timeout)
		}
	})
	if cerr != nil {
		werr = cerr
	}
	if werr != nil {
		// Another failure (a reader gone: EPIPE) only ends the live
		// stream, as in a direct run; a stall ends the run.
		w.dead = werr
		if stalled && w.stall != nil {
			w.stall()
		}
	}
	return written, werr
}
