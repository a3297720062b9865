//go:build linux

package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Files are the caller's descriptors passed with a request (nil when not
// passed). The server closes them once the handler returns.
type Files struct {
	Stdin, Stdout, Stderr *os.File
}

func (f Files) close() {
	for _, x := range []*os.File{f.Stdin, f.Stdout, f.Stderr} {
		if x != nil {
			x.Close()
		}
	}
}

// Handler runs one request. ctx ends when the client hangs up (or the
// server stops); the handler must then end the run (the library kills the
// tree) and return.
type Handler func(ctx context.Context, req *Request, files Files) Response

// Server serves run requests on a unix socket. Set the fields before
// Listen.
type Server struct {
	// Socket is the socket's path; "" is DefaultSocket, whose directory
	// is created (0700) when missing. Either way the directory must be
	// this uid's with mode 0700.
	Socket string
	// MaxRuns is how many requests run at once (<= 0: twice the CPUs).
	// A request over the cap waits for a slot, up to MaxQueue of them
	// (<= 0: 256); beyond that it is refused as busy.
	MaxRuns, MaxQueue int
	Handler           Handler
	// Log hears about refused peers and malformed requests (nil: slog's
	// default).
	Log *slog.Logger
	// RequestTimeout bounds the wait for a client's request once it has
	// connected (0: 30 s); it does not bound the run.
	RequestTimeout time.Duration

	// uid is the only uid served (os.Geteuid unless a test sets it).
	uid     int
	uidSet  bool
	slots   chan struct{}
	mu      sync.Mutex
	pending int
	wg      sync.WaitGroup
}

// Listen checks the socket's directory, replaces a stale socket (one no
// server answers on) and listens, with the socket at mode 0600.
func (s *Server) Listen() (*net.UnixListener, error) {
	path, create := s.Socket, false
	if path == "" {
		path, create = DefaultSocket(os.Getenv), true
	}
	if !filepath.IsAbs(path) {
		a, err := filepath.Abs(path)
		if err != nil {
			return nil, err
		}
		path = a
	}
	s.Socket = path
	if err := prepareDir(filepath.Dir(path), create); err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err == nil {
		if st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
			return nil, fmt.Errorf("%s exists and is not a socket of uid %d; not replacing it", path, os.Geteuid())
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("a server already listens at %s", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("stale socket %s: %w", path, err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The directory (0700) already keeps others out; this is the second
	// lock.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

// Serve accepts connections on ln until ctx ends, then closes ln (which
// removes the socket), cancels the runs in flight and waits for them.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if s.Handler == nil {
		return errors.New("serve: no handler")
	}
	if !s.uidSet {
		s.uid = os.Geteuid()
	}
	n := s.MaxRuns
	if n <= 0 {
		n = 2 * runtime.NumCPU()
	}
	s.slots = make(chan struct{}, n)
	if s.MaxQueue <= 0 {
		s.MaxQueue = 256
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	var err error
	for {
		c, aerr := ln.AcceptUnix()
		if aerr != nil {
			if ctx.Err() == nil {
				err = aerr
			}
			break
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(ctx, c)
		}()
	}
	cancel()
	s.wg.Wait()
	return err
}

// peerUID is the uid and pid of the process that connected c.
func peerUID(c *net.UnixConn) (uid, pid int, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return -1, 0, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := rc.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return -1, 0, err
	}
	if cerr != nil {
		return -1, 0, cerr
	}
	return int(cred.Uid), int(cred.Pid), nil
}

func (s *Server) refuse(c *net.UnixConn, kind, msg string) {
	_ = writeResponse(c, Response{Error: &Refusal{Kind: kind, Message: msg, ExitStatus: 125}})
}

func (s *Server) handle(ctx context.Context, c *net.UnixConn) {
	defer c.Close()
	uid, pid, err := peerUID(c)
	if err != nil {
		s.log().Warn("confine serve: refused a peer whose credentials could not be read", "err", err)
		return
	}
	if uid != s.uid {
		s.log().Warn("confine serve: refused a peer of another uid", "peer_uid", uid, "peer_pid", pid, "uid", s.uid)
		s.refuse(c, "peer", fmt.Sprintf("this confine server serves uid %d only; the client runs as uid %d", s.uid, uid))
		return
	}
	if err := checkPeer(c, pid); err != nil {
		s.log().Warn("confine serve: refused a client inside a confined run", "peer_pid", pid, "err", err)
		s.refuse(c, "peer", err.Error())
		return
	}
	timeout := s.RequestTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	req, files, err := readRequest(c)
	if err != nil {
		s.log().Warn("confine serve: refused a request", "peer_pid", pid, "err", err)
		s.refuse(c, "usage", err.Error())
		return
	}
	defer files.close()
	_ = c.SetReadDeadline(time.Time{})

	// The client sends nothing more: EOF (or anything else) from it
	// ends the run.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		var b [1]byte
		_, _ = c.Read(b[:])
		cancel()
	}()

	s.mu.Lock()
	busy := s.pending >= cap(s.slots)+s.MaxQueue
	if !busy {
		s.pending++
	}
	s.mu.Unlock()
	if busy {
		s.refuse(c, "busy", fmt.Sprintf("the confine server at %s is busy: %d runs going and %d waiting (--max-runs, --max-queue)", s.Socket, cap(s.slots), s.MaxQueue))
		return
	}
	defer func() {
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}()
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	case <-runCtx.Done():
		s.refuse(c, "cancelled", "the client hung up while the run waited for a slot")
		return
	}
	resp := s.Handler(runCtx, req, files)
	files.close()
	if err := writeResponse(c, resp); err != nil && runCtx.Err() == nil {
		s.log().Warn("confine serve: could not answer", "peer_pid", pid, "err", err)
	}
}

// readRequest reads one framed request and the descriptors passed with
// it.
func readRequest(c *net.UnixConn) (*Request, Files, error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr[:], oob)
	var fds []int
	if oobn > 0 {
		fds = parseRights(oob[:oobn])
	}
	var files Files
	closeFDs := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		closeFDs()
		if errors.Is(err, io.EOF) {
			return nil, files, fmt.Errorf("%w: the client sent no request", ErrProtocol)
		}
		return nil, files, fmt.Errorf("%w: reading the request: %v", ErrProtocol, err)
	}
	if flags&unix.MSG_CTRUNC != 0 {
		closeFDs()
		return nil, files, fmt.Errorf("%w: more than 3 descriptors passed", ErrProtocol)
	}
	if n < len(hdr) {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			closeFDs()
			return nil, files, fmt.Errorf("%w: short request header: %v", ErrProtocol, err)
		}
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > MaxRequest {
		closeFDs()
		return nil, files, fmt.Errorf("%w: request of %d bytes is over the limit of %d", ErrProtocol, size, MaxRequest)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		closeFDs()
		return nil, files, fmt.Errorf("%w: request cut short: %v", ErrProtocol, err)
	}
	req, err := decodeRequest(body)
	if err != nil {
		closeFDs()
		return nil, files, err
	}
	if len(fds) != len(req.Files) {
		closeFDs()
		return nil, files, fmt.Errorf("%w: the request names %d passed descriptors, %d came", ErrProtocol, len(req.Files), len(fds))
	}
	for i, name := range req.Files {
		if name == "stdin" {
			// Non-blocking (so in the poller), so that closing it after
			// the run ends the library's copy from it (a pipe the client
			// feeds).
			_ = unix.SetNonblock(fds[i], true)
		}
		f := os.NewFile(uintptr(fds[i]), name)
		slot := map[string]**os.File{"stdin": &files.Stdin, "stdout": &files.Stdout, "stderr": &files.Stderr}[name]
		if *slot == nil {
			*slot = f
			continue
		}
		f.Close()
		files.close()
		for _, fd := range fds[i+1:] {
			unix.Close(fd)
		}
		return nil, Files{}, fmt.Errorf("%w: descriptor %q passed twice", ErrProtocol, name)
	}
	return req, files, nil
}

func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for _, m := range msgs {
		if r, err := unix.ParseUnixRights(&m); err == nil {
			fds = append(fds, r...)
		}
	}
	return fds
}
