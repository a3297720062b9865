//go:build linux

package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
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
		return nil, err
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
	if err := <-lost; err == nil || !strings.Contains(err.Error(), "read none of its output") {
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
	var held []net.Conn
	for !strings.Contains(logb.String(), "accept failed") {
		c, err := net.Dial("unix", s.Socket)
		if err != nil {
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
	if _, err := os.Stat(s.Socket); err != nil {
		t.Fatalf("socket after the accept errors: %v", err)
	}
	if r := ask(t, s.Socket, frame(goodReq)); r == nil || r.Result == nil {
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
