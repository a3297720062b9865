//go:build linux

package serve

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
	"golang.org/x/sys/unix"
)

const goodReq = `{"version":1,"spec":{"Program":"p"}}`

// dialIdle connects and sends nothing.
func dialIdle(t *testing.T, socket string) *net.UnixConn {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ask sends b and reads the answer, its writing half left open (raw's
// CloseWrite ends a run, racing its start).
func ask(t *testing.T, socket string, b []byte) *Response {
	t.Helper()
	c := dialIdle(t, socket)
	_, _ = c.Write(b)
	return answerOf(t, c)
}

// answerOf reads the server's answer on c (nil at EOF without one).
func answerOf(t *testing.T, c net.Conn) *Response {
	t.Helper()
	r, err := decodeAnswer(c)
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	return r
}

func decodeAnswer(c net.Conn) (*Response, error) {
	b, err := io.ReadAll(c)
	if err != nil {
		return nil, fmt.Errorf("%w (after %q)", err, b)
	}
	if len(b) == 0 {
		return nil, nil
	}
	var r Response
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// waitConns waits until the server holds n connections.
func waitConns(s *Server, n int) {
	for {
		s.mu.Lock()
		got := s.conns
		s.mu.Unlock()
		if got == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestConnectionCaps: per client process, connections beyond the cap are
// refused (and evict nothing); at the total cap a new connection evicts
// the oldest that has sent no request, and is refused only when every
// held connection has one.
func TestConnectionCaps(t *testing.T) {
	t.Run("per peer", func(t *testing.T) {
		s := start(t, newEcho(), func(s *Server) { s.MaxConnsPerPeer, s.MaxConns = 3, 100 })
		idle := []*net.UnixConn{dialIdle(t, s.Socket), dialIdle(t, s.Socket), dialIdle(t, s.Socket)}
		waitConns(s, 3)
		r := raw(t, s.Socket, frame(goodReq))
		if r == nil || r.Error == nil || r.Error.Kind != "busy" || !strings.Contains(r.Error.Message, "process") {
			t.Fatalf("4th connection of one process: %+v, want busy naming the per-process cap", r)
		}
		// Nothing was evicted: the first idle one still gets its run.
		// (No CloseWrite: that ends a run, racing its start.)
		if _, err := idle[0].Write(frame(goodReq)); err != nil {
			t.Fatal(err)
		}
		if r := answerOf(t, idle[0]); r == nil || r.Result == nil {
			t.Fatalf("held connection after a refusal: %+v (%+v)", r, r.Error)
		}
	})
	t.Run("total, evicting the idle", func(t *testing.T) {
		s := start(t, newEcho(), func(s *Server) { s.MaxConnsPerPeer, s.MaxConns = 100, 3 })
		idle := []*net.UnixConn{dialIdle(t, s.Socket)}
		waitConns(s, 1)
		idle = append(idle, dialIdle(t, s.Socket), dialIdle(t, s.Socket))
		waitConns(s, 3)
		r := ask(t, s.Socket, frame(goodReq))
		if r == nil || r.Result == nil || string(r.Result.Stdout.Head) != "p" {
			t.Fatalf("a request at the cap: %+v, want it served", r)
		}
		if r := answerOf(t, idle[0]); r == nil || r.Error == nil || r.Error.Kind != "busy" || !strings.Contains(r.Error.Message, "sent no request") {
			t.Fatalf("the oldest idle connection: %+v, want it evicted as busy", r)
		}
	})
	t.Run("total, all with requests", func(t *testing.T) {
		h := newEcho()
		s := start(t, h, func(s *Server) { s.MaxConnsPerPeer, s.MaxConns, s.MaxRuns = 100, 2, 2 })
		for range 2 {
			c := dialIdle(t, s.Socket)
			if _, err := c.Write(frame(`{"version":1,"spec":{"Program":"block"}}`)); err != nil {
				t.Fatal(err)
			}
			<-h.started
		}
		r := raw(t, s.Socket, frame(goodReq))
		if r == nil || r.Error == nil || r.Error.Kind != "busy" || !strings.Contains(r.Error.Message, "all with requests") {
			t.Fatalf("over the cap with every connection running: %+v, want busy", r)
		}
	})
}

// TestRequestMemory: the requests held together stay within
// MaxRequestMemory: while one client holds a (claimed) 16 MiB request
// open, another waits for room and is refused as busy at its deadline;
// once the first goes, requests fit again. A claimed size costs no
// memory until its bytes come (readBody).
func TestRequestMemory(t *testing.T) {
	h := newEcho()
	s := start(t, h, func(s *Server) { s.MaxRequestMemory, s.RequestTimeout = MaxRequest, 2*time.Second })
	// A whole 16 MiB request (padded with blanks), whose run blocks: it
	// holds the budget while it runs.
	body := `{"version":1,"spec":{"Program":"block"}}`
	big := dialIdle(t, s.Socket)
	if _, err := big.Write(frame(body + strings.Repeat(" ", MaxRequest-len(body)))); err != nil {
		t.Fatal(err)
	}
	<-h.started
	r := raw(t, s.Socket, frame(goodReq))
	if r == nil || r.Error == nil || r.Error.Kind != "busy" || !strings.Contains(r.Error.Message, "request memory") {
		t.Fatalf("a request while the budget is taken: %+v, want busy", r)
	}
	big.Close()
	<-h.cancelled
	if r := ask(t, s.Socket, frame(goodReq)); r == nil || r.Result == nil {
		t.Fatalf("a request after the budget came back: %+v", r)
	}
	if b, err := readBody(strings.NewReader("abc"), 5); b != nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("readBody of a short stream = %q, %v", b, err)
	}
	if b, err := readBody(strings.NewReader(strings.Repeat("x", 200<<10)), 200<<10); err != nil || len(b) != 200<<10 || cap(b) != 200<<10 {
		t.Fatalf("readBody: len %d cap %d, %v; want exactly the size", len(b), cap(b), err)
	}
}

// TestStalledReaders: with one run slot, a client that never reads its
// live output loses its run (its handler's ctx ends), and one that never
// reads its answer holds no slot: in both cases another client's run
// goes. (Nothing here is timed: a slot held for ever hangs the test.)
func TestStalledReaders(t *testing.T) {
	lost := make(chan error, 1)
	h := func(ctx context.Context, req *Request, files Files) Response {
		switch req.Spec.Program {
		case "chatty":
			chunk := bytes.Repeat([]byte("x"), 64<<10)
			for ctx.Err() == nil {
				if _, err := files.Out.Write(chunk); err != nil {
					<-ctx.Done()
					lost <- err
					break
				}
			}
			return Response{Result: &spec.CommandResult{RunID: "r", Cancelled: true}}
		case "big":
			out := bytes.Repeat([]byte("y"), 8<<20)
			return Response{Result: &spec.CommandResult{RunID: "r", Stdout: spec.Stream{Head: out, Total: int64(len(out))}}}
		}
		return Response{Result: &spec.CommandResult{RunID: "r", Stdout: spec.Stream{Head: []byte("ok")}}}
	}
	s := startHandler(t, h, func(s *Server) { s.MaxRuns, s.WriteTimeout = 1, 200*time.Millisecond })

	// Live output into a pipe nobody reads.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	c, err := Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *Response, 1)
	go func() {
		r, _ := Do(context.Background(), c, &Request{Spec: spec.CommandSpec{Program: "chatty"}, Files: []string{"stdout"}}, []*os.File{pw})
		done <- r
	}()
	if err := <-lost; !errors.Is(err, errStalled) {
		t.Fatalf("the stalled live write: %v", err)
	}
	if r := <-done; r == nil || r.Result == nil || !r.Result.Cancelled {
		t.Fatalf("the stalled client's answer: %+v, want its run cancelled", r)
	}
	pw.Close()

	// An answer nobody reads (8 MiB, more than the socket buffers).
	deaf := dialIdle(t, s.Socket)
	if _, err := deaf.Write(frame(`{"version":1,"spec":{"Program":"big"}}`)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		// Do keeps its writing half open while it waits (raw's
		// CloseWrite would end a run that waits for the slot).
		c, err := Dial(s.Socket)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Do(context.Background(), c, &Request{Spec: spec.CommandSpec{Program: "p"}}, nil)
		if err != nil || r.Result == nil || string(r.Result.Stdout.Head) != "ok" {
			t.Fatalf("a run beside the deaf client: %+v, %v", r, err)
		}
	}
}

// syncBuffer is a bytes.Buffer for a logger written from many goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// TestAcceptOutOfDescriptors: this process's descriptor limit is lowered
// until connect and accept fail with EMFILE. The server logs it and keeps
// serving: its socket stays, a run in flight is not cancelled, and once
// descriptors are back a new client is served.
func TestAcceptOutOfDescriptors(t *testing.T) {
	logb := &syncBuffer{}
	h := newEcho()
	s := start(t, h, func(s *Server) { s.Log = slog.New(slog.NewTextHandler(logb, nil)) })
	running, err := Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan *Response, 1)
	go func() {
		r, _ := Do(context.Background(), running, &Request{Spec: spec.CommandSpec{Program: "block"}}, nil)
		runDone <- r
	}()
	<-h.started

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	open := countFDs(t)
	low := old
	low.Cur = uint64(open + 40)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	// Restored however the test ends (the tests after it need it).
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
	var held []net.Conn
	for !strings.Contains(logb.String(), "accept failed") {
		c, err := net.Dial("unix", s.Socket)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) {
				// The backlog is full: the server's accept is failing
				// (or about to); its log will say so.
				time.Sleep(time.Millisecond)
				continue
			}
			if !errors.Is(err, syscall.EMFILE) {
				t.Fatalf("dial: %v", err)
			}
			// Our side is out too: free one, so the next connect
			// lands in the backlog for the server's failing accept.
			if len(held) == 0 {
				t.Fatal("out of descriptors with no connection held")
			}
			held[0].Close()
			held = held[1:]
			continue
		}
		held = append(held, c)
	}
	for _, c := range held {
		c.Close()
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	t.Logf("server log: %s", firstLine(logb.String(), "accept failed"))
	defer func() {
		if t.Failed() {
			t.Logf("full log: %s", logb.String())
		}
	}()
	if _, err := os.Stat(s.Socket); err != nil {
		t.Fatalf("socket after the accept errors: %v", err)
	}
	// Dial, as a client does: the backlog may still be full of the
	// connections closed above, which the server accepts once its
	// back-off ends.
	c, err := Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Write(frame(goodReq))
	if r := answerOf(t, c); r == nil || r.Result == nil {
		t.Fatalf("a request after the accept errors: %+v", r)
	}
	select {
	case r := <-runDone:
		t.Fatalf("the run in flight ended: %+v", r)
	default:
	}
	_ = running.CloseWrite()
	<-h.cancelled
	if r := <-runDone; r == nil || r.Result == nil {
		t.Fatalf("the run in flight: %+v", r)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func firstLine(s, with string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, with) {
			return l
		}
	}
	return ""
}

// TestLiveWriter: a run's live output never waits for its client. A
// client that reads slowly gets all of it, in order; one that lets the
// buffer fill, or reads nothing for the timeout, loses its run (stall);
// one that closed its end ends the stream only.
func TestLiveWriter(t *testing.T) {
	tests := []struct {
		name    string
		write   int    // bytes the run writes, 64 KiB at a time
		reader  string // "slow", "none", "closed"
		stalled bool
	}{
		{"slow reader", 3 << 20, "slow", false},
		{"absent reader, buffer full", 3 << 20, "none", true},
		{"absent reader, little output", 200 << 10, "none", true},
		{"reader gone", 200 << 10, "closed", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			defer pw.Close()
			got := make(chan []byte, 1)
			switch tt.reader {
			case "slow":
				go func() {
					var b bytes.Buffer
					buf := make([]byte, 32<<10)
					for {
						time.Sleep(time.Millisecond)
						n, err := pr.Read(buf)
						b.Write(buf[:n])
						if err != nil {
							got <- b.Bytes()
							return
						}
					}
				}()
			case "closed":
				pr.Close()
			}
			var stalls atomic.Int32
			w := newLiveWriter(pw, 100*time.Millisecond, func() { stalls.Add(1) })
			var want bytes.Buffer
			var werr error
			for i := 0; i < tt.write && werr == nil; i += 64 << 10 {
				p := bytes.Repeat([]byte{byte('a' + i>>16%26)}, 64<<10)
				want.Write(p)
				_, werr = w.Write(p)
				if tt.reader == "slow" {
					// The run writes about as fast as the reader reads.
					time.Sleep(5 * time.Millisecond)
				}
			}
			if tt.reader == "none" && werr == nil {
				// Little output: the stall shows once the drain waited.
				for werr == nil {
					time.Sleep(10 * time.Millisecond)
					_, werr = w.Write([]byte("x"))
				}
			}
			w.finish()
			if (stalls.Load() > 0) != tt.stalled {
				t.Fatalf("stalls %d, write error %v; want stalled %v", stalls.Load(), werr, tt.stalled)
			}
			if tt.stalled && !errors.Is(werr, errStalled) {
				t.Fatalf("write error %v, want errStalled", werr)
			}
			if tt.reader == "slow" {
				pw.Close()
				if b := <-got; !bytes.Equal(b, want.Bytes()) || werr != nil {
					t.Fatalf("the slow reader got %d bytes (want %d), write error %v", len(b), want.Len(), werr)
				}
			}
		})
	}
}

// TestFairSlots: a free slot goes to the processes with waiters in turn,
// whatever the number of requests each has waiting; a waiter whose ctx
// ends leaves the queue.
func TestFairSlots(t *testing.T) {
	f := newFairSlots(1)
	if !f.acquire(context.Background(), 1) {
		t.Fatal("a free slot was not taken")
	}
	order := make(chan int, 10)
	var wg sync.WaitGroup
	wait := func(pid int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if f.acquire(context.Background(), pid) {
				order <- pid
			}
		}()
		for {
			f.mu.Lock()
			n := 0
			for _, q := range f.queues {
				n += len(q)
			}
			f.mu.Unlock()
			if n > 0 && func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.queues[pid]) > 0 }() {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	// Process 7 queues four requests, then process 8 one, then 9 one.
	for range 4 {
		wait(7)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan bool)
	go func() { gone <- f.acquire(ctx, 9) }()
	wait(8)
	cancel()
	if <-gone {
		t.Fatal("a cancelled waiter got a slot")
	}
	var got []int
	for range 5 {
		f.release()
		got = append(got, <-order)
	}
	wg.Wait()
	if want := []int{7, 8, 7, 7, 7}; !slices.Equal(got, want) {
		t.Fatalf("slots went to %v, want %v", got, want)
	}
}

// TestEvictionFairness walks admit through sequences of connections of
// several processes at the total cap: a process evicts the oldest
// waiting connection of the process with the most waiting, only while it
// holds fewer than that (by more than an eighth of it), or when it holds
// every connection.
func TestEvictionFairness(t *testing.T) {
	type step struct {
		pid     int
		admit   bool
		evicted int // index into the steps of the connection evicted, -1 none
	}
	cases := []struct {
		name     string
		maxConns int
		steps    []step
	}{
		{"alone, its own oldest goes", 2, []step{{1, true, -1}, {1, true, -1}, {1, true, 0}, {1, true, 1}}},
		{"a newcomer evicts from the largest holder", 3, []step{{1, true, -1}, {1, true, -1}, {2, true, -1}, {3, true, 0}}},
		{"equals refuse instead of evicting", 4, []step{{1, true, -1}, {1, true, -1}, {2, true, -1}, {2, true, -1}, {1, false, -1}, {2, false, -1}}},
		{"a holder of fewer evicts until even", 4, []step{{1, true, -1}, {1, true, -1}, {1, true, -1}, {2, true, -1}, {2, true, 0}, {2, false, -1}, {1, false, -1}}},
		// 17 and 16 are even within an eighth; a newcomer still evicts.
		{"near-equals refuse instead of evicting", 33, slices.Concat(slices.Repeat([]step{{1, true, -1}}, 17), slices.Repeat([]step{{2, true, -1}}, 16), []step{{2, false, -1}, {3, true, 0}})},
		// 17 against 14 is more than an eighth apart.
		{"a holder of fewer by more than an eighth evicts", 31, slices.Concat(slices.Repeat([]step{{1, true, -1}}, 17), slices.Repeat([]step{{2, true, -1}}, 14), []step{{2, true, 0}, {2, false, -1}})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{MaxConns: tc.maxConns, MaxConnsPerPeer: 100, perPeer: map[int]int{}, reading: map[int]*list.List{}}
			var pcs []*conn
			for i, st := range tc.steps {
				fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
				if err != nil {
					t.Fatal(err)
				}
				unix.Close(fds[1])
				f := os.NewFile(uintptr(fds[0]), "pair")
				fc, err := net.FileConn(f)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fc.Close() })
				pc := &conn{c: fc.(*net.UnixConn), pid: st.pid}
				pcs = append(pcs, pc)
				before := make([]bool, len(pcs))
				for j, p := range pcs {
					before[j] = p.evicted
				}
				why := s.admit(pc)
				if (why == "") != st.admit {
					t.Fatalf("step %d (pid %d): admit = %q, want admitted %v", i, st.pid, why, st.admit)
				}
				for j, p := range pcs {
					if p.evicted != before[j] && j != st.evicted {
						t.Fatalf("step %d: connection %d evicted, want %d", i, j, st.evicted)
					}
				}
				if st.evicted >= 0 && !pcs[st.evicted].evicted {
					t.Fatalf("step %d: connection %d not evicted", i, st.evicted)
				}
				if st.evicted >= 0 {
					s.release(pcs[st.evicted])
				}
			}
		})
	}
}

// TestPeerRate walks the per-process byte pacing with a fake clock: a
// burst goes at once, then a process's bytes wait for the refill (and
// later ones queue behind), past the deadline they wait for it and are
// refused as busy, and one process's debt never delays another's.
func TestPeerRate(t *testing.T) {
	type step struct {
		at       time.Duration // fake time of the request
		pid      int
		n        int64
		deadline time.Duration // from at
		slept    time.Duration
		busy     bool
	}
	const rate, burst = 100, 1000
	cases := []struct {
		name  string
		steps []step
	}{
		{"burst at once", []step{{0, 1, 1000, time.Second, 0, false}}},
		{"then at the rate", []step{{0, 1, 1000, time.Second, 0, false}, {0, 1, 50, time.Second, 500 * time.Millisecond, false}, {0, 1, 50, 2 * time.Second, time.Second, false}}},
		{"refilled with time", []step{{0, 1, 1000, time.Second, 0, false}, {10 * time.Second, 1, 1000, time.Second, 0, false}}},
		{"past the deadline: waits for it, busy", []step{{0, 1, 1000, time.Second, 0, false}, {0, 1, 500, 3 * time.Second, 3 * time.Second, true}, {0, 1, 100, 2 * time.Second, time.Second, false}}},
		{"processes apart", []step{{0, 1, 1000, time.Second, 0, false}, {0, 2, 1000, time.Second, 0, false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := time.Unix(1000, 0)
			now := base
			var slept time.Duration
			p := newPeerRate(rate, burst)
			p.now = func() time.Time { return now }
			p.sleep = func(_ context.Context, d time.Duration) error { slept = d; return nil }
			for i, st := range tc.steps {
				now, slept = base.Add(st.at), 0
				err := p.take(context.Background(), st.pid, st.n, now.Add(st.deadline))
				if errors.Is(err, errBusy) != st.busy || (err != nil && !st.busy) {
					t.Fatalf("step %d: %v, want busy %v", i, err, st.busy)
				}
				if slept != st.slept {
					t.Fatalf("step %d: slept %v, want %v", i, slept, st.slept)
				}
			}
		})
	}
	p := newPeerRate(rate, burst)
	for pid := range 5 {
		_ = p.take(context.Background(), pid, 1, time.Now().Add(time.Second))
	}
	p.pruneAtLeast = 2
	p.now = func() time.Time { return time.Now().Add(time.Hour) }
	_ = p.take(context.Background(), 99, 1, time.Now().Add(2*time.Hour))
	if len(p.peers) != 1 {
		t.Fatalf("after an hour, %d processes remembered, want the one new", len(p.peers))
	}
}

// TestWaitRoom walks byteSem and peerTurns, which share waitRoom: what
// fits is taken at once, what does not waits for a release (and gets it),
// or is refused as busy at its deadline, or ends with its ctx.
func TestWaitRoom(t *testing.T) {
	type take func(ctx context.Context, deadline time.Time) (func(), error)
	sem := func() (take, take) {
		b := newByteSem(10, "bytes")
		six := func(ctx context.Context, d time.Time) (func(), error) { return b.acquire(ctx, 6, d) }
		return six, six
	}
	turns := func() (take, take) {
		p := newPeerTurns(1)
		return func(ctx context.Context, d time.Time) (func(), error) { return p.acquire(ctx, 7, d) },
			func(ctx context.Context, d time.Time) (func(), error) { return p.acquire(ctx, 8, d) }
	}
	cases := []struct {
		name string
		make func() (first, second take)
		// other: second is of another process, so it never waits for first.
		other bool
	}{
		{"byteSem", sem, false},
		{"peerTurns", turns, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			first, second := tc.make()
			later := time.Now().Add(time.Hour)
			put, err := first(context.Background(), later)
			if err != nil {
				t.Fatal(err)
			}
			if tc.other {
				put2, err := second(context.Background(), time.Now())
				if err != nil {
					t.Fatalf("another process's turn: %v", err)
				}
				put2()
				second = first
			}
			if _, err := second(context.Background(), time.Now()); !errors.Is(err, errBusy) {
				t.Fatalf("over the room, at its deadline: %v, want busy", err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if _, err := second(ctx, later); !errors.Is(err, context.Canceled) {
				t.Fatalf("over the room, ctx ended: %v, want cancelled", err)
			}
			got := make(chan error)
			go func() {
				put2, err := second(context.Background(), later)
				if err == nil {
					put2()
				}
				got <- err
			}()
			put()
			put() // once only
			if err := <-got; err != nil {
				t.Fatalf("after a release: %v", err)
			}
			put3, err := second(context.Background(), time.Now())
			if err != nil {
				t.Fatalf("everything released: %v", err)
			}
			if _, err := second(context.Background(), time.Now()); !errors.Is(err, errBusy) {
				t.Fatalf("over the room again (a release counted twice?): %v, want busy", err)
			}
			put3()
		})
	}
}

// TestDialWaitsOutFullBacklog: with the server's listen backlog full (a
// non-blocking connect fails with EAGAIN, the control), Dial waits in
// the kernel and connects as soon as the server accepts one.
func TestDialWaitsOutFullBacklog(t *testing.T) {
	path := filepath.Join(privDir(t), "s.sock")
	lfd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(lfd)
	if err := unix.Bind(lfd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(lfd, 1); err != nil {
		t.Fatal(err)
	}
	full := false
	for range 64 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); errors.Is(err, unix.EAGAIN) {
			full = true
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if !full {
		t.Fatal("the backlog never filled: no EAGAIN for a non-blocking connect")
	}
	dialled := make(chan error, 1)
	go func() {
		c, err := Dial(path)
		if err == nil {
			c.Close()
		}
		dialled <- err
	}()
	select {
	case err := <-dialled:
		t.Fatalf("Dial returned with the backlog full: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	nfd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(nfd)
	if err := <-dialled; err != nil {
		t.Fatalf("Dial once the server accepted: %v", err)
	}
}

// TestSmallReserve: large requests together leave smallReserve of the
// request budget to the others (the control: the budget itself still
// has room for the large request refused), and a budget of one
// MaxRequest keeps no reserve, so one large request still fits.
func TestSmallReserve(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name   string
		budget int64
		takes  []int64 // in order; each must be granted
		then   int64   // refused as busy at its deadline
		small  int64   // then granted
	}{
		{"two large fill all but the reserve", 2 * MaxRequest, []int64{MaxRequest, MaxRequest - smallReserve - mib}, 2 * mib, largeRequest},
		{"a budget of one request keeps no reserve", MaxRequest, []int64{MaxRequest}, 2 * mib, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Server{MaxRequestMemory: tc.budget}
			s.initMemory()
			later := time.Now().Add(time.Hour)
			var held int64
			for i, n := range tc.takes {
				if _, err := s.reserveMemory(context.Background(), n, later); err != nil {
					t.Fatalf("take %d (%d bytes): %v", i, n, err)
				}
				held += n
			}
			if _, err := s.reserveMemory(context.Background(), tc.then, time.Now()); !errors.Is(err, errBusy) {
				t.Fatalf("a large request of %d bytes with %d held: %v, want busy", tc.then, held, err)
			}
			if free := tc.budget - held; tc.small == 0 && free != 0 || tc.small > 0 && free < tc.then {
				t.Fatalf("control: %d bytes free of the budget", free)
			}
			if tc.small > 0 {
				if _, err := s.reserveMemory(context.Background(), tc.small, time.Now()); err != nil {
					t.Fatalf("a small request of %d bytes: %v", tc.small, err)
				}
			}
		})
	}
}

// TestShortBacklog: a listener that went through shortBacklog (as Serve's
// does) holds at most listenBacklog+1 connections the server has not
// accepted (the kernel counts one over), and a non-blocking connect
// beyond them fails at once with EAGAIN; the control, Go's listener as
// it comes (the system's maximum), holds more.
func TestShortBacklog(t *testing.T) {
	tests := []struct {
		name  string
		short bool
	}{
		{"Go's default backlog (control)", false},
		{"short backlog", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(privDir(t), "s.sock")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			if tt.short {
				rc, err := ln.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				if err := shortBacklog(rc); err != nil {
					t.Fatal(err)
				}
			}
			held := 0
			for range 2 * listenBacklog {
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
				if err != nil {
					t.Fatal(err)
				}
				defer unix.Close(fd)
				err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
				if errors.Is(err, unix.EAGAIN) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				held++
			}
			t.Logf("%d connections held in the backlog (listenBacklog %d)", held, listenBacklog)
			if full := held <= listenBacklog+1; full != tt.short {
				t.Errorf("%d connections held before EAGAIN; want at most %d: %v", held, listenBacklog+1, tt.short)
			}
		})
	}
}
