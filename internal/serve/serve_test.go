//go:build linux

package serve

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
	"golang.org/x/sys/unix"
)

// echoHandler answers with a result whose stdout is the request's
// program, or blocks until its run is cancelled when the program is
// "block" (reporting on started and cancelled).
type echoHandler struct {
	started, cancelled chan string
}

func (h *echoHandler) handle(ctx context.Context, req *Request, files Files) Response {
	if req.Spec.Program == "block" {
		h.started <- req.Spec.Program
		<-ctx.Done()
		h.cancelled <- req.Spec.Program
		return Response{Result: &spec.CommandResult{RunID: "r", Cancelled: true}}
	}
	out := req.Spec.Program
	if files.Stdout != nil {
		out += "+stdout"
	}
	return Response{Result: &spec.CommandResult{RunID: "r", Stdout: spec.Stream{Head: []byte(out), Total: int64(len(out))}}}
}

// start serves h on a socket in a fresh 0700 directory.
func start(t *testing.T, h *echoHandler, tweak func(*Server)) *Server {
	t.Helper()
	return startHandler(t, h.handle, tweak)
}

// startHandler serves h on a socket in a fresh 0700 directory.
func startHandler(t *testing.T, h Handler, tweak func(*Server)) *Server {
	t.Helper()
	s := &Server{Socket: filepath.Join(privDir(t), SocketName), Handler: h, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if tweak != nil {
		tweak(s)
	}
	ln, err := s.Listen()
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// privDir is a fresh directory of mode 0700 (t.TempDir's follows the
// umask).
func privDir(t *testing.T) string {
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func newEcho() *echoHandler {
	return &echoHandler{started: make(chan string, 4), cancelled: make(chan string, 4)}
}

// raw sends b as it is and returns the server's answer (nil at EOF
// without one).
func raw(t *testing.T, socket string, b []byte) *Response {
	t.Helper()
	c, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A server that refuses early may have closed already (EPIPE); its
	// answer is still there to read.
	_, _ = c.Write(b)
	_ = c.(*net.UnixConn).CloseWrite()
	var r Response
	if err := json.NewDecoder(bufio.NewReader(c)).Decode(&r); err != nil {
		if errors.Is(err, io.EOF) {
			return nil
		}
		t.Fatalf("decode answer: %v", err)
	}
	return &r
}

func frame(s string) []byte {
	b := make([]byte, 4+len(s))
	binary.BigEndian.PutUint32(b, uint32(len(s)))
	copy(b[4:], s)
	return b
}

func TestProtocol(t *testing.T) {
	s := start(t, newEcho(), nil)
	good := `{"version":1,"spec":{"Program":"prog"}}`
	over := make([]byte, 4)
	binary.BigEndian.PutUint32(over, MaxRequest+1)
	tests := []struct {
		name    string
		send    []byte
		want    string // stdout of the result, or
		refusal string // a substring of the refusal's message
	}{
		{"good", frame(good), "prog", ""},
		{"bad json", frame(`{"version":1,"spec":`), "", "bad request"},
		{"not an object", frame(`[1,2]`), "", "bad request"},
		{"trailing data", frame(good + `{}`), "", "data after"},
		{"unknown field", frame(`{"version":1,"spec":{"Program":"p"},"daemon_env":["X=1"]}`), "", "unknown field"},
		{"wrong version", frame(`{"version":99,"spec":{"Program":"p"}}`), "", "version 99"},
		{"oversized", append(over, 'x'), "", "over the limit"},
		{"cut short", frame(good)[:10], "", "cut short"},
		{"short header", []byte{0, 0}, "", "short request header"},
		{"files named, none passed", frame(`{"version":1,"spec":{"Program":"p"},"files":["stdin"]}`), "", "names 1 passed descriptors, 0 came"},
		{"unknown file name", frame(`{"version":1,"spec":{"Program":"p"},"files":["fd9"]}`), "", "unknown passed file"},
		{"nothing", nil, "", "sent no request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := raw(t, s.Socket, tt.send)
			if r == nil {
				t.Fatal("no answer")
			}
			if tt.refusal != "" {
				if r.Error == nil || r.Error.ExitStatus != 125 || !strings.Contains(r.Error.Message, tt.refusal) {
					t.Fatalf("answer %+v (result %+v), want a refusal (125) saying %q", r.Error, r.Result, tt.refusal)
				}
				return
			}
			if r.Error != nil || r.Result == nil || string(r.Result.Stdout.Head) != tt.want {
				t.Fatalf("answer %+v / %+v, want stdout %q", r.Error, r.Result, tt.want)
			}
		})
	}
}

func TestClientPassesFiles(t *testing.T) {
	s := start(t, newEcho(), nil)
	c, err := Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Do(context.Background(), c, &Request{Spec: spec.CommandSpec{Program: "p"}, Files: []string{"stdout"}}, []*os.File{os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Result.Stdout.Head); got != "p+stdout" {
		t.Fatalf("stdout %q, want the handler to have seen the passed file", got)
	}
}

// TestPeerOfAnotherUID: the server serves its own uid only (here it is
// told it runs as another, so that the test's own connection is the
// foreign one; internal/cli's tests do it across real uids as root).
func TestPeerOfAnotherUID(t *testing.T) {
	h := newEcho()
	s := start(t, h, func(s *Server) { s.uid, s.uidSet = os.Geteuid()+1, true })
	r := raw(t, s.Socket, frame(`{"version":1,"spec":{"Program":"p"}}`))
	if r == nil || r.Error == nil || r.Error.Kind != "peer" || r.Result != nil {
		t.Fatalf("answer %+v, want a peer refusal", r)
	}
	select {
	case p := <-h.started:
		t.Fatalf("the handler ran %s for a foreign peer", p)
	default:
	}
}

func TestDisconnectCancelsRun(t *testing.T) {
	h := newEcho()
	s := start(t, h, nil)
	c, err := Dial(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *Response, 1)
	go func() {
		r, _ := Do(ctx, c, &Request{Spec: spec.CommandSpec{Program: "block"}}, nil)
		done <- r
	}()
	<-h.started
	// The client half-closes: the run ends and the answer still comes.
	cancel()
	<-h.cancelled
	if r := <-done; r == nil || r.Result == nil || !r.Result.Cancelled {
		t.Fatalf("answer %+v, want the cancelled run's result", r)
	}
	// A client that goes away entirely ends its run too.
	c2, err := net.Dial("unix", s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.Write(frame(`{"version":1,"spec":{"Program":"block"}}`)); err != nil {
		t.Fatal(err)
	}
	<-h.started
	c2.Close()
	<-h.cancelled
}

func TestBusy(t *testing.T) {
	h := newEcho()
	s := start(t, h, func(s *Server) { s.MaxRuns, s.MaxQueue = 1, 1 })
	conns := make([]net.Conn, 2)
	for i := range conns {
		c, err := net.Dial("unix", s.Socket)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		if _, err := c.Write(frame(`{"version":1,"spec":{"Program":"block"}}`)); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-h.started
		}
	}
	// The second waits for the slot; make sure it is queued before the
	// third comes.
	for {
		s.mu.Lock()
		n := s.pending
		s.mu.Unlock()
		if n == 2 {
			break
		}
		runtime.Gosched()
	}
	r := raw(t, s.Socket, frame(`{"version":1,"spec":{"Program":"p"}}`))
	if r == nil || r.Error == nil || r.Error.Kind != "busy" {
		t.Fatalf("answer %+v, want busy", r)
	}
	conns[0].Close()
	<-h.cancelled
	<-h.started // the queued one got the slot
	conns[1].Close()
	<-h.cancelled
}

func TestSocketPlace(t *testing.T) {
	mk := func(t *testing.T, mode os.FileMode) string {
		d := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(d, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name   string
		socket func(t *testing.T) string
		err    string
	}{
		{"0700 directory", func(t *testing.T) string { return filepath.Join(mk(t, 0o700), "s") }, ""},
		{"group-readable directory", func(t *testing.T) string { return filepath.Join(mk(t, 0o750), "s") }, "mode 0750"},
		{"world-writable directory", func(t *testing.T) string { return filepath.Join(mk(t, 0o777), "s") }, "mode 0777"},
		{"missing directory", func(t *testing.T) string { return filepath.Join(t.TempDir(), "no", "s") }, "no such file"},
		{"symlinked directory", func(t *testing.T) string {
			d := mk(t, 0o700)
			l := filepath.Join(t.TempDir(), "link")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(l, "s")
		}, "not a directory"},
		{"another uid's directory", func(t *testing.T) string {
			d := mk(t, 0o700)
			if os.Geteuid() != 0 {
				t.Skip("needs root to give a directory to another uid")
			}
			if err := os.Chown(d, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "s")
		}, "belongs to uid 65534"},
		{"a file in the way", func(t *testing.T) string {
			p := filepath.Join(mk(t, 0o700), "s")
			if err := os.WriteFile(p, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, "not a socket"},
		{"a live socket with its backlog full (a flood)", func(t *testing.T) string {
			p := filepath.Join(mk(t, 0o700), "s")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ln.Close() })
			rc, err := ln.SyscallConn()
			if err != nil {
				t.Fatal(err)
			}
			_ = rc.Control(func(fd uintptr) { err = unix.Listen(int(fd), 1) })
			if err != nil {
				t.Fatal(err)
			}
			for {
				fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { unix.Close(fd) })
				if err := unix.Connect(fd, &unix.SockaddrUnix{Name: p}); errors.Is(err, unix.EAGAIN) {
					return p
				} else if err != nil {
					t.Fatal(err)
				}
			}
		}, "already listens"},
		{"stale socket", func(t *testing.T) string {
			p := filepath.Join(mk(t, 0o700), "s")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			ln.SetUnlinkOnClose(false)
			ln.Close()
			return p
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Server{Socket: tt.socket(t), Handler: newEcho().handle}
			ln, err := s.Listen()
			if tt.err != "" {
				if err == nil {
					ln.Close()
					t.Fatalf("listened at %s, want a refusal saying %q", s.Socket, tt.err)
				}
				if !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %q, want it to say %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			st, err := os.Stat(s.Socket)
			if err != nil || st.Mode().Perm() != 0o600 || st.Mode()&os.ModeSocket == 0 {
				t.Fatalf("socket %s: %v %v, want a socket of mode 0600", s.Socket, st.Mode(), err)
			}
		})
	}
	t.Run("a live server's socket", func(t *testing.T) {
		s := start(t, newEcho(), nil)
		s2 := &Server{Socket: s.Socket, Handler: newEcho().handle}
		if ln, err := s2.Listen(); err == nil || !strings.Contains(err.Error(), "already listens") {
			if ln != nil {
				ln.Close()
			}
			t.Fatalf("second server: %v, want a refusal", err)
		}
	})
}

func TestDialRefuses(t *testing.T) {
	d := t.TempDir()
	stale := filepath.Join(d, "stale")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	for _, tt := range []struct{ name, socket, says string }{
		{"missing", filepath.Join(d, "none"), "no such socket"},
		{"dead", stale, "nothing listens"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Dial(tt.socket)
			if !errors.Is(err, ErrNoServer) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), tt.socket) {
				t.Fatalf("Dial: %v, want ErrNoServer naming %s and saying %q", err, tt.socket, tt.says)
			}
		})
	}
}

func TestDefaultSocket(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := DefaultSocket(env(map[string]string{"XDG_RUNTIME_DIR": "/run/user/7"})); got != "/run/user/7/confine/serve.sock" {
		t.Fatalf("with XDG_RUNTIME_DIR: %s", got)
	}
	for _, v := range []string{"", "relative/dir"} {
		got := DefaultSocket(env(map[string]string{"XDG_RUNTIME_DIR": v}))
		if !strings.HasSuffix(got, "/confine-"+itoa(os.Geteuid())+"/serve.sock") {
			t.Fatalf("XDG_RUNTIME_DIR=%q: %s, want the per-uid directory", v, got)
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
