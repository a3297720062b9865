//go:build linux

// Package gocacheprog serves a confined run's Go build cache from the
// launcher (GOCACHEPROG, `go doc cmd/go/internal/cacheprog`): a get looks
// in the run's own cache, then reads the caller's GOCACHE through; a put
// goes into the run's own cache only. The caller's cache is opened
// read-only and never written, so a run cannot plant anything in it; what
// a run learns from it is the entry of an action id it computed, that is
// of inputs it holds.
//
// go starts its GOCACHEPROG as a child, inside the sandbox, so that child
// is only a relay (Relay, run by launch.Init under the name Arg0) that
// connects to the server's unix socket beside it and copies bytes. The
// server writes into the run's cache directory, which the run can change
// under it, only through a descriptor of that directory with
// RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS and a rename inside one
// subdirectory descriptor, so a symlink the run plants there never turns
// a write into one elsewhere.
package gocacheprog

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Arg0 is the base name the relay runs under: a symlink of that name to
// the launcher's executable, beside the socket.
const Arg0 = "confine-gocacheprog"

// SocketName is the server's socket, in the same directory as the relay's
// symlink.
const SocketName = "gocacheprog.sock"

// maxConns bounds the connections served at once (go opens one per go
// command): each holds a buffer in the launcher.
const maxConns = 64

// maxLine bounds one request's JSON line.
const maxLine = 64 << 10

// ErrProtocol is returned for a request the server does not accept.
var ErrProtocol = errors.New("gocacheprog: protocol error")

// request and response are cmd/go/internal/cacheprog's Request and
// Response, the fields used here.
type request struct {
	ID       int64
	Command  string
	ActionID []byte `json:",omitempty"`
	OutputID []byte `json:",omitempty"`
	BodySize int64  `json:",omitempty"`
}

type response struct {
	ID            int64
	Err           string     `json:",omitempty"`
	KnownCommands []string   `json:",omitempty"`
	Miss          bool       `json:",omitempty"`
	OutputID      []byte     `json:",omitempty"`
	Size          int64      `json:",omitempty"`
	Time          *time.Time `json:",omitempty"`
	DiskPath      string     `json:",omitempty"`
}

// Server serves one run.
type Server struct {
	own     *os.File // the run's cache directory
	ownPath string
	caller  *os.File // the caller's GOCACHE; nil: none
	ln      *net.UnixListener
	// maxBody bounds one put's body and so one file the server writes:
	// the run's own file-size limit, which the launcher's writes are not
	// subject to.
	maxBody int64

	mu         sync.Mutex
	conns      map[net.Conn]bool
	wg         sync.WaitGroup
	fromCaller int // gets the caller's cache answered
}

// Start listens on socket and serves the run's cache ownDir, reading
// through to callerDir ("" for none). maxBody (> 0) bounds what one put
// or one read-through writes: the run's file-size limit.
func Start(socket, ownDir, callerDir string, maxBody int64) (*Server, error) {
	if maxBody <= 0 {
		return nil, errors.New("gocacheprog: no bound on a put's size")
	}
	own, err := openDir(ownDir)
	if err != nil {
		return nil, fmt.Errorf("gocacheprog: the run's cache: %w", err)
	}
	s := &Server{own: own, ownPath: filepath.Clean(ownDir), conns: map[net.Conn]bool{}, maxBody: maxBody}
	if callerDir != "" {
		if s.caller, err = openDir(callerDir); err != nil {
			own.Close()
			return nil, fmt.Errorf("gocacheprog: the caller's GOCACHE: %w", err)
		}
	}
	s.ln, err = net.ListenUnix("unix", &net.UnixAddr{Name: socket, Net: "unix"})
	if err != nil {
		s.closeDirs()
		return nil, fmt.Errorf("gocacheprog: %w", err)
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func openDir(p string) (*os.File, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: p, Err: err}
	}
	return os.NewFile(uintptr(fd), p), nil
}

func (s *Server) closeDirs() {
	s.own.Close()
	if s.caller != nil {
		s.caller.Close()
	}
}

// Close stops serving: the listener and every connection close, and
// Close returns when their handlers have.
func (s *Server) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.closeDirs()
	return err
}

// FromCaller is how many gets the caller's cache answered.
func (s *Server) FromCaller() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fromCaller
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		full := len(s.conns) >= maxConns
		if !full {
			s.conns[c] = true
		}
		s.mu.Unlock()
		if full {
			c.Close()
			continue
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			_ = s.Serve(c, c)
			c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}()
	}
}

// Serve speaks the protocol on one stream until close, EOF or an error.
func (s *Server) Serve(r io.Reader, w io.Writer) error {
	br := bufio.NewReaderSize(r, maxLine)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	send := func(res *response) error {
		if err := enc.Encode(res); err != nil {
			return err
		}
		return bw.Flush()
	}
	if err := send(&response{KnownCommands: []string{"get", "put", "close"}}); err != nil {
		return err
	}
	for {
		line, err := br.ReadSlice('\n')
		if err == io.EOF && len(bytes.TrimSpace(line)) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: reading a request: %v", ErrProtocol, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var req request
		if err := json.Unmarshal(line, &req); err != nil {
			return fmt.Errorf("%w: %v", ErrProtocol, err)
		}
		res := &response{ID: req.ID}
		switch req.Command {
		case "get":
			err = s.get(&req, res)
		case "put":
			err = s.put(&req, br, res)
			if errors.Is(err, ErrProtocol) {
				return err // the stream is out of step
			}
		case "close":
			return send(res)
		default:
			err = fmt.Errorf("unknown command %q", req.Command)
		}
		if err != nil {
			res = &response{ID: req.ID, Err: err.Error()}
		}
		if err := send(res); err != nil {
			return err
		}
	}
}

// entry is one action's record, in go's own cache layout: <aa>/<action>-a
// holds "v1 <action> <output> <size> <time>\n", <aa>/<output>-d the body.
type entry struct {
	output []byte
	size   int64
	time   time.Time
}

func entryName(id []byte, suffix string) string {
	h := hex.EncodeToString(id)
	return h[:2] + "/" + h + suffix
}

func validID(id []byte) bool { return len(id) == sha256.Size }

// readEntry reads action's entry from the cache directory dir.
func readEntry(dir *os.File, action []byte) (entry, bool) {
	b, err := readBeneath(dir, entryName(action, "-a"), 1024)
	if err != nil {
		return entry{}, false
	}
	f := strings.Fields(string(b))
	if len(f) != 5 || f[0] != "v1" || f[1] != hex.EncodeToString(action) {
		return entry{}, false
	}
	out, err1 := hex.DecodeString(f[2])
	size, err2 := strconv.ParseInt(f[3], 10, 64)
	nsec, err3 := strconv.ParseInt(f[4], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || !validID(out) || size < 0 {
		return entry{}, false
	}
	return entry{output: out, size: size, time: time.Unix(0, nsec)}, true
}

const resolveBeneath = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

func openBeneath(dir *os.File, name string, flags int, mode uint32) (*os.File, error) {
	fd, err := unix.Openat2(int(dir.Fd()), name, &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Mode: uint64(mode), Resolve: resolveBeneath})
	if err != nil {
		return nil, &os.PathError{Op: "openat2", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

func readBeneath(dir *os.File, name string, max int64) ([]byte, error) {
	f, err := openBeneath(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}

// hasOutput reports whether dir holds output's body at size bytes, as a
// regular file.
func hasOutput(dir *os.File, output []byte, size int64) bool {
	f, err := openBeneath(dir, entryName(output, "-d"), unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return false
	}
	defer f.Close()
	st, err := f.Stat()
	return err == nil && st.Mode().IsRegular() && st.Size() == size
}

func (s *Server) hit(res *response, e entry) {
	t := e.time
	res.OutputID, res.Size, res.Time = e.output, e.size, &t
	res.DiskPath = filepath.Join(s.ownPath, entryName(e.output, "-d"))
}

func (s *Server) get(req *request, res *response) error {
	if !validID(req.ActionID) {
		return errors.New("get: bad action id")
	}
	if e, ok := readEntry(s.own, req.ActionID); ok && hasOutput(s.own, e.output, e.size) {
		s.hit(res, e)
		return nil
	}
	if s.caller != nil {
		if e, ok := readEntry(s.caller, req.ActionID); ok {
			if err := s.copyFromCaller(req.ActionID, e); err == nil {
				s.mu.Lock()
				s.fromCaller++
				s.mu.Unlock()
				s.hit(res, e)
				return nil
			}
		}
	}
	res.Miss = true
	return nil
}

// copyFromCaller copies the caller's entry for action into the run's
// cache, checking the body against its output id (go names outputs by
// their SHA-256).
func (s *Server) copyFromCaller(action []byte, e entry) error {
	f, err := openBeneath(s.caller, entryName(e.output, "-d"), unix.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() || st.Size() != e.size {
		return errors.New("the caller's entry does not match its body")
	}
	if e.size > s.maxBody {
		return errors.New("the caller's entry is larger than the run may write")
	}
	if err := s.writeOutput(e.output, e.size, f); err != nil {
		return err
	}
	return s.writeEntry(action, e)
}

func (s *Server) put(req *request, br *bufio.Reader, res *response) error {
	if req.BodySize < 0 || req.BodySize > s.maxBody {
		return fmt.Errorf("%w: put: body of %d bytes", ErrProtocol, req.BodySize)
	}
	var body io.Reader = bytes.NewReader(nil)
	if req.BodySize > 0 {
		// go ends the request's JSON line with a blank line.
		c, err := br.ReadByte()
		for err == nil && (c == '\n' || c == '\r' || c == ' ') {
			c, err = br.ReadByte()
		}
		if err != nil || c != '"' {
			return fmt.Errorf("%w: put: no body", ErrProtocol)
		}
		body = base64.NewDecoder(base64.StdEncoding,
			io.LimitReader(br, int64(base64.StdEncoding.EncodedLen(int(req.BodySize)))))
	}
	var err error
	if !validID(req.ActionID) || !validID(req.OutputID) {
		err = errors.New("put: bad action or output id")
	} else {
		err = s.writeOutput(req.OutputID, req.BodySize, body)
	}
	if req.BodySize > 0 {
		// Whatever happened to the body, the stream goes on after it.
		if _, cerr := io.Copy(io.Discard, body); cerr != nil {
			return fmt.Errorf("%w: put: body: %v", ErrProtocol, cerr)
		}
		if tail := make([]byte, 2); !readFull(br, tail) || string(tail) != "\"\n" {
			return fmt.Errorf("%w: put: body not terminated", ErrProtocol)
		}
	}
	if err != nil {
		return err
	}
	e := entry{output: req.OutputID, size: req.BodySize, time: time.Now()}
	if err := s.writeEntry(req.ActionID, e); err != nil {
		return err
	}
	s.hit(res, e)
	return nil
}

func readFull(r io.Reader, b []byte) bool {
	_, err := io.ReadFull(r, b)
	return err == nil
}

// subdir opens (making it if need be) the two-hex-digit subdirectory of
// the run's cache that name lies in.
func (s *Server) subdir(name string) (*os.File, string, error) {
	sub, base, _ := strings.Cut(name, "/")
	if err := unix.Mkdirat(int(s.own.Fd()), sub, 0o777); err != nil && err != unix.EEXIST {
		return nil, "", &os.PathError{Op: "mkdirat", Path: sub, Err: err}
	}
	d, err := openBeneath(s.own, sub, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	return d, base, err
}

// writeAt writes what r yields (size bytes when size >= 0) as name in the
// run's cache: a new file in name's subdirectory, renamed over name there.
// If sum is set, the content must hash to it.
func (s *Server) writeAt(name string, r io.Reader, size int64, sum []byte) error {
	d, base, err := s.subdir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := ".tmp-" + hex.EncodeToString(rnd[:])
	f, err := openBeneath(d, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW, 0o666)
	if err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
	case size >= 0 && n != size:
		err = fmt.Errorf("%d bytes, not %d", n, size)
	case sum != nil && !bytes.Equal(h.Sum(nil), sum):
		err = errors.New("content does not match its output id")
	}
	if err == nil {
		err = unix.Renameat(int(d.Fd()), tmp, int(d.Fd()), base)
	}
	if err != nil {
		_ = unix.Unlinkat(int(d.Fd()), tmp, 0)
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

func (s *Server) writeOutput(output []byte, size int64, r io.Reader) error {
	return s.writeAt(entryName(output, "-d"), r, size, output)
}

func (s *Server) writeEntry(action []byte, e entry) error {
	line := fmt.Sprintf("v1 %x %x %20d %20d\n", action, e.output, e.size, e.time.UnixNano())
	return s.writeAt(entryName(action, "-a"), strings.NewReader(line), -1, nil)
}
