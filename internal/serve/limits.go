//go:build linux

package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// errBusy: what a request waited for (request memory, a turn to be
// read) stayed taken until its deadline.
var errBusy = errors.New("the confine server is busy")

// waitRoom is what byteSem and peerTurns share: a lock, and a channel
// closed (and replaced) on every change, so that a request waits for room
// until its deadline and tries again after each change.
type waitRoom struct {
	mu      sync.Mutex
	changed chan struct{}
}

func newWaitRoom() waitRoom { return waitRoom{changed: make(chan struct{})} }

// wait calls take under the lock until it returns true, waiting for a
// change between the tries; until deadline, then busy's error (or ctx's
// end, then ctx's error).
func (w *waitRoom) wait(ctx context.Context, deadline time.Time, take func() bool, busy func() error) error {
	var timer *time.Timer
	for {
		w.mu.Lock()
		if take() {
			w.mu.Unlock()
			return nil
		}
		changed := w.changed
		w.mu.Unlock()
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
			defer timer.Stop()
		}
		select {
		case <-changed:
		case <-timer.C:
			return busy()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// change runs give under the lock and wakes every waiter.
func (w *waitRoom) change(give func()) {
	w.mu.Lock()
	give()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// byteSem hands out bytes of a fixed budget: the requests the server
// holds, together, never exceed it. A request that does not fit waits;
// any request that fits may go first (no head-of-line blocking of small
// requests behind a large one).
type byteSem struct {
	what string // for errors: what the bytes are
	room waitRoom
	free int64
}

func newByteSem(n int64, what string) *byteSem {
	return &byteSem{what: what, free: n, room: newWaitRoom()}
}

// acquire takes n bytes, waiting until deadline (or ctx's end) for them,
// and returns the function that gives them back (once).
func (b *byteSem) acquire(ctx context.Context, n int64, deadline time.Time) (func(), error) {
	err := b.room.wait(ctx, deadline, func() bool {
		if b.free < n {
			return false
		}
		b.free -= n
		return true
	}, func() error {
		return fmt.Errorf("%w: no room in its %s for %d more before the request's deadline", errBusy, b.what, n)
	})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { b.put(n) }) }, nil
}

func (b *byteSem) put(n int64) {
	b.room.change(func() { b.free += n })
}

// readBody reads exactly size bytes from r. A claimed size costs nothing
// until bytes come: the first 64 KiB are read into a buffer of that size,
// and only then is the whole size allocated (once; no doubling garbage).
func readBody(r io.Reader, size int) ([]byte, error) {
	first := min(size, 64<<10)
	b := make([]byte, first)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, shortBody(err)
	}
	if size == first {
		return b, nil
	}
	all := make([]byte, size)
	copy(all, b)
	if _, err := io.ReadFull(r, all[first:]); err != nil {
		return nil, shortBody(err)
	}
	return all, nil
}

func shortBody(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// liveBuffer is how much live output of one stream the server holds for
// a client that has not read it yet. A run writes into it without ever
// waiting for the client; when a client leaves this much unread, its run
// is ended.
const liveBuffer = 1 << 20

// errStalled: the client left its live output unread.
var errStalled = errors.New("the client left its output unread")

// liveWriter passes a run's live output to f (a client's stdout or
// stderr, passed with its request) through a buffer of liveBuffer bytes
// that a goroutine drains. The run's writes never wait for the client: a
// client that lets the buffer fill, or reads nothing for timeout while
// output waits, loses its run (stall is called, and the writes fail).
// The descriptor's mode is left as the client set it (never made
// non-blocking: it may be the client's terminal). Any error is final.
type liveWriter struct {
	f       *os.File
	timeout time.Duration
	stall   func()
	mu      sync.Mutex
	pending []byte
	closed  bool
	dead    error
	wake    chan struct{}
	done    chan struct{}
}

// newLiveWriter starts the writer's drain; nil when f is.
func newLiveWriter(f *os.File, timeout time.Duration, stall func()) *liveWriter {
	if f == nil {
		return nil
	}
	w := &liveWriter{f: f, timeout: timeout, stall: stall, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.drain()
	return w
}

func (w *liveWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead != nil {
		return 0, w.dead
	}
	if len(w.pending)+len(p) > liveBuffer {
		w.dead = fmt.Errorf("%w: %s: more than %d bytes", errStalled, w.f.Name(), liveBuffer)
		w.stall()
		return 0, w.dead
	}
	w.pending = append(w.pending, p...)
	select {
	case w.wake <- struct{}{}:
	default:
	}
	return len(p), nil
}

// finish waits for what is pending to reach the client (within the
// writer's timeout); nil-safe.
func (w *liveWriter) finish() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
	<-w.done
}

func (w *liveWriter) drain() {
	defer close(w.done)
	for {
		w.mu.Lock()
		p, closed := w.pending, w.closed
		w.pending = nil
		w.mu.Unlock()
		if len(p) == 0 {
			if closed {
				return
			}
			<-w.wake
			continue
		}
		err := writeWithin(w.f, p, w.timeout)
		if err == nil {
			continue
		}
		w.mu.Lock()
		w.dead, w.pending = err, nil
		w.mu.Unlock()
		// A reader gone (EPIPE) only ends the live stream, as in a
		// direct run; a stalled one ends the run.
		if errors.Is(err, errStalled) {
			w.stall()
		}
		return
	}
}

// chunk is what one write may carry after poll said the descriptor
// takes data: a pipe's atomic size, which a pipe with room takes whole.
const chunk = 4096

// writeWithin writes p to f, failing with errStalled when the descriptor
// takes nothing for timeout.
func writeWithin(f *os.File, p []byte, timeout time.Duration) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		written := 0
		deadline := time.Now().Add(timeout)
		for written < len(p) {
			left := time.Until(deadline)
			if left <= 0 {
				werr = fmt.Errorf("%w: %s: nothing read for %v", errStalled, f.Name(), timeout)
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
			deadline = time.Now().Add(timeout)
		}
	})
	if cerr != nil {
		return cerr
	}
	return werr
}

// fairSlots hands out run slots fairly between client processes: a free
// slot goes to the next process, in turn, that has a request waiting, so
// that one process's many requests (a flood) queue behind each other and
// not in front of another process's one.
type fairSlots struct {
	mu     sync.Mutex
	free   int
	size   int
	queues map[int][]chan struct{} // per pid, oldest first
	turn   []int                   // pids with waiters, in turn order
}

func newFairSlots(n int) *fairSlots {
	return &fairSlots{free: n, size: n, queues: map[int][]chan struct{}{}}
}

// acquire waits for a slot for a request of process pid; false when ctx
// ended first.
func (f *fairSlots) acquire(ctx context.Context, pid int) bool {
	f.mu.Lock()
	if f.free > 0 && len(f.turn) == 0 {
		f.free--
		f.mu.Unlock()
		return true
	}
	ch := make(chan struct{})
	if len(f.queues[pid]) == 0 {
		f.turn = append(f.turn, pid)
	}
	f.queues[pid] = append(f.queues[pid], ch)
	f.mu.Unlock()
	select {
	case <-ch:
		return true
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	q := f.queues[pid]
	for i, w := range q {
		if w == ch {
			f.queues[pid] = append(q[:i:i], q[i+1:]...)
			if len(f.queues[pid]) == 0 {
				delete(f.queues, pid)
				f.turn = slices.DeleteFunc(f.turn, func(p int) bool { return p == pid })
			}
			return false
		}
	}
	// Handed a slot as ctx ended: give it on.
	f.handOn()
	return false
}

// release frees a slot, handing it to the process whose turn it is.
func (f *fairSlots) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handOn()
}

// handOn gives a free slot to the first waiter of the process whose turn
// it is, which then goes to the back of the turn; with none, the slot is
// free. f.mu is held.
func (f *fairSlots) handOn() {
	if len(f.turn) == 0 {
		f.free++
		return
	}
	pid := f.turn[0]
	q := f.queues[pid]
	close(q[0])
	f.turn = f.turn[1:]
	if len(q) == 1 {
		delete(f.queues, pid)
	} else {
		f.queues[pid] = q[1:]
		f.turn = append(f.turn, pid)
	}
}

// peerTurns lets each client process have at most limit requests read at
// once (bodies read and decoded): a process sending many large requests
// gets a share of the server's reading, not all of it.
type peerTurns struct {
	room  waitRoom
	limit int
	busy  map[int]int
}

func newPeerTurns(limit int) *peerTurns {
	return &peerTurns{limit: limit, busy: map[int]int{}, room: newWaitRoom()}
}

// acquire waits until deadline (or ctx's end) for a turn of pid and
// returns the function that ends it (once).
func (p *peerTurns) acquire(ctx context.Context, pid int, deadline time.Time) (func(), error) {
	err := p.room.wait(ctx, deadline, func() bool {
		if p.busy[pid] >= p.limit {
			return false
		}
		p.busy[pid]++
		return true
	}, func() error {
		return fmt.Errorf("%w: process %d has %d requests being read already", errBusy, pid, p.limit)
	})
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { p.put(pid) }) }, nil
}

func (p *peerTurns) put(pid int) {
	p.room.change(func() {
		if p.busy[pid]--; p.busy[pid] <= 0 {
			delete(p.busy, pid)
		}
	})
}

// SoftMemoryLimit is the Go heap limit a server process sets for itself
// (SetProcessMemoryLimit): twice the default request budget, for the
// requests and their decoded copies, and 128 MiB for the rest (a
// goroutine per held connection, answers being written).
const SoftMemoryLimit = 2*(64<<20) + 128<<20

// SetProcessMemoryLimit makes the garbage collector of this process
// work to keep its heap under SoftMemoryLimit (a soft limit: a heap that
// is really in use may pass it), unless $GOMEMLIMIT says otherwise. For
// the process that owns the server (confine serve); a library never sets
// it for its caller.
func SetProcessMemoryLimit() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(SoftMemoryLimit)
	}
}

// peerRate paces the request bytes of each client process: a token
// bucket per pid of burst bytes, refilled at rate bytes a second. A
// request takes its size from its process's bucket before its body is
// read; when the bucket holds too little, the request waits for the
// refill (its bytes are taken at once, so later requests of the same
// process queue behind it), or, when the refill would come after its
// deadline, waits for the deadline and is refused as busy. Reading and decoding a request costs the
// server CPU by the byte (encoding/json: 10 to 45 ns a byte): this keeps
// one process's flood of large requests from taking a core.
type peerRate struct {
	mu           sync.Mutex
	rate, burst  float64
	peers        map[int]*bucket
	now          func() time.Time
	sleep        func(ctx context.Context, d time.Duration) error
	pruneAtLeast int
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newPeerRate(rate, burst int64) *peerRate {
	return &peerRate{rate: float64(rate), burst: float64(burst), peers: map[int]*bucket{}, now: time.Now, sleep: sleepCtx, pruneAtLeast: 1024}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// take takes n bytes from pid's bucket, waiting for them until deadline
// (or ctx's end).
func (p *peerRate) take(ctx context.Context, pid int, n int64, deadline time.Time) error {
	p.mu.Lock()
	now := p.now()
	b := p.peers[pid]
	if b == nil {
		if len(p.peers) >= p.pruneAtLeast {
			p.prune(now)
		}
		b = &bucket{tokens: p.burst, at: now}
		p.peers[pid] = b
	}
	b.tokens = min(p.burst, b.tokens+p.rate*now.Sub(b.at).Seconds())
	b.at = now
	wait := time.Duration(0)
	if short := float64(n) - b.tokens; short > 0 {
		wait = time.Duration(short / p.rate * float64(time.Second))
	}
	if now.Add(wait).After(deadline) {
		p.mu.Unlock()
		// Refused at its deadline, not at once: a client that sends
		// again on the refusal comes back at the pace of its deadline,
		// not in a loop of refusals.
		if err := p.sleep(ctx, deadline.Sub(now)); err != nil {
			return err
		}
		return fmt.Errorf("%w: process %d sent more than %d bytes a second of requests (its burst %d); this one's %d bytes would wait %v, past its deadline",
			errBusy, pid, int64(p.rate), int64(p.burst), n, wait.Round(time.Millisecond))
	}
	b.tokens -= float64(n)
	p.mu.Unlock()
	if wait == 0 {
		return nil
	}
	return p.sleep(ctx, wait)
}

// prune forgets the processes whose buckets have refilled (their entries
// would read as full anyway). p.mu is held.
func (p *peerRate) prune(now time.Time) {
	for pid, b := range p.peers {
		if b.tokens+p.rate*now.Sub(b.at).Seconds() >= p.burst {
			delete(p.peers, pid)
		}
	}
	p.pruneAtLeast = max(1024, 2*len(p.peers))
}
