//go:build linux

package serve

import (
	"bufio"
	"bytes"
	"container/list"
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
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Files are the caller's descriptors passed with a request (nil when not
// passed). The server closes them once the handler returns.
type Files struct {
	Stdin, Stdout, Stderr *os.File
	// Out and Err write to Stdout and Stderr (nil when not passed)
	// through a buffer, so that a run never waits for its client: a
	// client that leaves 1 MiB unread, or reads nothing for the server's
	// WriteTimeout, fails the writes and loses its run (the handler's ctx
	// ends). A handler writes the caller's output through these, never
	// through Stdout and Stderr themselves.
	Out, Err io.Writer
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
	// WriteTimeout bounds every write to a client: its answer, and each
	// write of live output to the descriptors it passed (0: 10 s). A
	// client that reads nothing for that long loses its answer, or its
	// run; it never keeps a run slot.
	WriteTimeout time.Duration
	// MaxConns caps the connections held at once (<= 0: DefaultMaxConns).
	// At the cap a new connection evicts the oldest one still sending
	// its request of the process with the most such, when its own
	// process holds fewer connections than that (or holds them all);
	// otherwise it is refused as busy (see admit).
	MaxConns int
	// MaxConnsPerPeer caps the connections of one client process (its
	// pid, from SO_PEERCRED; <= 0: 256). Beyond it a connection is
	// refused as busy and evicts nothing.
	MaxConnsPerPeer int
	// MaxRequestMemory bounds the bytes of all requests held at once,
	// read or being read (<= 0: 64 MiB; at least MaxRequest). A request
	// waits for room up to RequestTimeout, then is refused as busy.
	MaxRequestMemory int64
	// MaxRequestRate paces the request bytes of one client process, in
	// bytes a second (<= 0: DefaultRequestRate), with a burst of
	// MaxRequest; requests over 1 MiB of all processes together are
	// paced at twice that, with a burst of two MaxRequest. A request
	// that finds its allowance spent waits for it, or, when it would
	// come after RequestTimeout, waits for that and is refused as busy.
	MaxRequestRate int64

	// uid is the only uid served (os.Geteuid unless a test sets it).
	uid     int
	uidSet  bool
	slots   *fairSlots
	mu      sync.Mutex
	pending int
	wg      sync.WaitGroup
	// conns is the count of connections held, perPeer per client pid,
	// reading the ones still sending their request, per pid, oldest
	// first.
	conns   int
	perPeer map[int]int
	reading map[int]*list.List
	mem     *byteSem
	reads   *peerTurns
	rate    *peerRate
	// largeRate paces the bytes of large requests of all processes
	// together (one bucket, pid 0).
	largeRate *peerRate
	large     *byteSem
	// largeMem is the part of the request memory large requests may
	// hold together: all of it but smallReserve.
	largeMem *byteSem
	// open counts accepted connections not yet closed; connGone hears
	// of each close.
	open     atomic.Int64
	connGone chan struct{}
	// refused is the accept loop's batch of refusals (its own: only
	// the loop touches it).
	refused refusals
}

// largeRequest is the size above which a request is read and decoded
// one at a time.
const largeRequest = 1 << 20

// smallReserve is the request memory large requests leave to the others
// (when the budget is that much over one MaxRequest).
const smallReserve = 4 << 20

// DefaultRequestRate is Server.MaxRequestRate when unset: 4 MiB a
// second for each client process, after a first MaxRequest at once.
// Large input is better passed as a descriptor (the request's "stdin"
// file), which is streamed and not paced.
const DefaultRequestRate = 4 << 20

// readsPerPeer is how many requests of one client process are read (and
// decoded) at once; its others wait, within RequestTimeout.
const readsPerPeer = 2

// DefaultMaxConns is the connection cap when MaxConns is unset: a quarter
// of the descriptor limit, at most 1024 (runs and the queue need at most
// max-runs + max-queue). Connections being refused hold descriptors too,
// up to as many again (Server.maxOpen): half the limit is left for the
// runs. Each run's fork copies the server's descriptor table and its
// exec closes it again: at 4000 descriptors that doubled the cost of
// starting /bin/true (0.55 to 1.1 ms), so idle connections held by the
// thousand slow every run down.
func DefaultMaxConns() int {
	var rl unix.Rlimit
	n := 1024
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Cur/4 < uint64(n) {
		n = int(rl.Cur / 4)
	}
	return max(n, 16)
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
		} else if errors.Is(err, unix.EAGAIN) {
			// Its backlog is full (a flood, or a busy server): someone
			// listens there; never taken for stale.
			return nil, fmt.Errorf("a server already listens at %s (its listen backlog is full)", path)
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

// setDefaults fills in the limits left at zero and makes the server's
// bookkeeping, before Serve accepts its first connection.
func (s *Server) setDefaults() {
	if !s.uidSet {
		s.uid = os.Geteuid()
	}
	n := s.MaxRuns
	if n <= 0 {
		n = 2 * runtime.NumCPU()
	}
	s.slots = newFairSlots(n)
	if s.MaxQueue <= 0 {
		s.MaxQueue = 256
	}
	if s.MaxConns <= 0 {
		s.MaxConns = DefaultMaxConns()
	}
	if s.MaxConnsPerPeer <= 0 {
		s.MaxConnsPerPeer = 256
	}
	if s.MaxRequestMemory <= 0 {
		s.MaxRequestMemory = 64 << 20
	}
	s.MaxRequestMemory = max(s.MaxRequestMemory, MaxRequest)
	if s.RequestTimeout <= 0 {
		s.RequestTimeout = 30 * time.Second
	}
	if s.WriteTimeout <= 0 {
		s.WriteTimeout = 10 * time.Second
	}
	s.perPeer = map[int]int{}
	s.reading = map[int]*list.List{}
	s.initMemory()
	s.reads = newPeerTurns(readsPerPeer)
	if s.MaxRequestRate <= 0 {
		s.MaxRequestRate = DefaultRequestRate
	}
	s.rate = newPeerRate(s.MaxRequestRate, MaxRequest)
	s.largeRate = newPeerRate(2*s.MaxRequestRate, 2*MaxRequest)
	s.large = newByteSem(1, "turns to read a large request")
}

// Serve accepts connections on ln until ctx ends, then closes ln (which
// removes the socket), cancels the runs in flight and waits for them.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if s.Handler == nil {
		return errors.New("serve: no handler")
	}
	s.setDefaults()
	// Connections are accepted with accept4 on a second descriptor of
	// the listening socket (Go's listener offers no raw read), without
	// the poller: a refused one costs an accept4, a getsockopt, one send
	// and a close, never a registration with the poller or a Go object.
	// Only an admitted one becomes a net.UnixConn.
	lf, err := ln.File()
	if err != nil {
		return err
	}
	defer lf.Close()
	lrc, err := lf.SyscallConn()
	if err != nil {
		return err
	}
	lnrc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	if err := shortBacklog(lrc); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
		lf.Close()
	}()
	var backoff time.Duration
	s.connGone = make(chan struct{}, 1)
	for {
		// Connections being refused or evicted still hold a
		// descriptor until they are answered: beyond the cap and a
		// margin for them, wait (the backlog holds new ones) rather
		// than run out of descriptors.
		for s.open.Load() >= int64(s.maxOpen()) && ctx.Err() == nil {
			select {
			case <-s.connGone:
			case <-ctx.Done():
			}
		}
		var aerr error
		// The deadline only makes the loop look, once a second, whether
		// ln was closed by someone else (then Serve returns).
		_ = lf.SetReadDeadline(time.Now().Add(time.Second))
		rerr := lrc.Read(func(fd uintptr) bool {
			// Refusals are answered after the batch they came in: an
			// admitted connection behind them is handed to its
			// goroutine first (see refusals).
			defer s.refused.flush(&s.open)
			for ctx.Err() == nil && s.open.Load() < int64(s.maxOpen()) {
				nfd, _, err := unix.Accept4(int(fd), unix.SOCK_CLOEXEC)
				switch {
				case err == nil:
					backoff = 0
					if s.accepted(ctx, nfd) {
						// Its goroutine is next on this P, but
						// waits until this loop parks or is
						// preempted (10 ms) unless another P
						// is idle: let it run first.
						runtime.Gosched()
					}
					if len(s.refused.held) >= refuseBatch {
						s.refused.flush(&s.open)
					}
				case errors.Is(err, unix.EAGAIN):
					return false // wait in the poller for the next
				case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
				default:
					aerr = os.NewSyscallError("accept4", err)
					return true
				}
			}
			return true
		})
		if ctx.Err() != nil {
			break
		}
		if rerr != nil {
			if cerr := lnrc.Control(func(uintptr) {}); cerr != nil {
				err = cerr
				break
			}
			if errors.Is(rerr, os.ErrDeadlineExceeded) {
				continue
			}
			aerr = rerr
		}
		if aerr != nil {
			// Out of descriptors or memory (EMFILE, ENFILE, ENOBUFS):
			// never the end of the server. Wait for held connections
			// to go, and accept again.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log().Warn("confine serve: accept failed; retrying", "err", aerr, "retry_in", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
		}
	}
	cancel()
	s.wg.Wait()
	return err
}

// listenBacklog is the listening socket's backlog: a new connection
// waits behind at most this many others before the accept loop reaches
// it. Go listens with the system's maximum (net.core.somaxconn, 4096
// here): in a flood of connections the server refuses (about 20 us
// each), an ordinary client's connection waited behind thousands of
// them, 80 ms and more. With a short backlog, a flood beyond it fails at
// once in the kernel (EAGAIN for a non-blocking connect) at no cost to
// the server, and a blocking connect (Dial, Python's client) waits in
// the kernel's queue until the server accepts.
const listenBacklog = 64

// shortBacklog sets the backlog of the listening socket rc to
// listenBacklog (listen again on a listening unix socket sets it).
func shortBacklog(rc syscall.RawConn) error {
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = unix.Listen(int(fd), listenBacklog) }); err != nil {
		return err
	}
	if lerr != nil {
		return os.NewSyscallError("listen", lerr)
	}
	return nil
}

// accepted checks a new connection's peer and counts it against the
// caps, in the accept loop itself: a refused one is answered without
// waiting (refuseFD) and closed. An admitted one becomes a net.UnixConn
// served by a goroutine of its own; accepted says whether it was.
func (s *Server) accepted(ctx context.Context, fd int) bool {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		s.log().Warn("confine serve: refused a peer whose credentials could not be read", "err", err)
		unix.Close(fd)
		return false
	}
	uid, pid := int(cred.Uid), int(cred.Pid)
	if uid != s.uid {
		s.log().Warn("confine serve: refused a peer of another uid", "peer_uid", uid, "peer_pid", pid, "uid", s.uid)
		s.refused.hold(&s.open, fd, "peer", fmt.Sprintf("this confine server serves uid %d only; the client runs as uid %d", s.uid, uid))
		return false
	}
	// Counted against the caps first (cheap: a flood is refused here);
	// checked for being inside a run once it has sent its request
	// (reading /proc costs: idle connections never pay it), before
	// anything runs.
	pc := &conn{pid: pid}
	if why := s.admit(pc); why != "" {
		s.refused.hold(&s.open, fd, "busy", why)
		return false
	}
	// Only this loop evicts (admit), so nothing can evict pc before its
	// descriptor is a conn with its deadline.
	f := os.NewFile(uintptr(fd), "")
	fc, err := net.FileConn(f)
	if err != nil {
		// Out of descriptors for its duplicate: answered, then closed.
		s.log().Warn("confine serve: could not take an accepted connection", "peer_pid", pid, "err", err)
		s.release(pc)
		sendRefusal(fd, "busy", fmt.Sprintf("the confine server at %s could not take the connection: %v", s.Socket, err))
		f.Close()
		return false
	}
	f.Close()
	pc.c = fc.(*net.UnixConn)
	_ = pc.c.SetReadDeadline(pc.deadline)
	s.open.Add(1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.connClosed()
		defer pc.c.Close()
		defer s.release(pc)
		s.handle(ctx, pc)
	}()
	return true
}

// initMemory makes the request budget of MaxRequestMemory bytes.
func (s *Server) initMemory() {
	s.mem = newByteSem(s.MaxRequestMemory, "request memory (bytes)")
	s.largeMem = newByteSem(s.MaxRequestMemory-min(smallReserve, s.MaxRequestMemory-MaxRequest), "request memory for large requests (bytes)")
}

// maxOpen is how many accepted connections may hold a descriptor at
// once: MaxConns, and as many more being refused or evicted.
func (s *Server) maxOpen() int { return 2*s.MaxConns + 16 }

// connClosed counts a connection's descriptor closed (handle closes it).
func (s *Server) connClosed() {
	s.open.Add(-1)
	select {
	case s.connGone <- struct{}{}:
	default:
	}
}

// conn is one accepted connection, as the caps count it.
type conn struct {
	c   *net.UnixConn
	pid int
	// elem is its place in Server.reading while it sends its request;
	// evicted is set (under Server.mu) when a newer connection took its
	// place.
	elem    *list.Element
	evicted bool
	// deadline is when its request must have come.
	deadline time.Time
}

// admit counts pc against the caps: refused ("" when admitted) when its
// process holds MaxConnsPerPeer already, or when MaxConns are held and
// no connection can fairly make room. Room is made by evicting the
// oldest connection still sending its request of the process that has
// the most such: only for a process that holds fewer connections than
// that one has waiting, or that holds every connection (its own oldest
// goes); fewer by more than an eighth of that (evictSlack), when it has
// 8 or more waiting. So processes flooding the cap in near-equal numbers are refused
// (cheaply) instead of evicting each other in a loop, and a process
// with few connections always gets one.
func (s *Server) admit(pc *conn) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	mine := s.perPeer[pc.pid]
	if mine >= s.MaxConnsPerPeer {
		return fmt.Sprintf("the confine server at %s holds %d connections of process %d already (its cap per client process)", s.Socket, mine, pc.pid)
	}
	if s.conns >= s.MaxConns {
		most, waiting := 0, 0
		for pid, l := range s.reading {
			if l.Len() > waiting {
				most, waiting = pid, l.Len()
			}
		}
		if waiting == 0 {
			return fmt.Sprintf("the confine server at %s holds %d connections, its cap, all with requests", s.Socket, s.conns)
		}
		// Within an eighth of the most waiting counts as even: floods
		// of near-equal size would otherwise evict each other in a
		// chain (each eviction leaves its process one short, whose
		// next connection evicts again), every eviction costing the
		// server a held connection's whole life.
		if mine >= waiting-waiting/evictSlack && mine < s.conns {
			return fmt.Sprintf("the confine server at %s holds %d connections, its cap; process %d holds %d of them, and no process has more than %d still sending a request", s.Socket, s.conns, pc.pid, mine, waiting)
		}
		victim := s.reading[most].Front().Value.(*conn)
		s.unread(victim)
		victim.evicted = true
		// Wakes its reader, which answers busy and closes.
		_ = victim.c.SetReadDeadline(time.Unix(1, 0))
	}
	s.conns++
	s.perPeer[pc.pid]++
	l := s.reading[pc.pid]
	if l == nil {
		l = list.New()
		s.reading[pc.pid] = l
	}
	pc.elem = l.PushBack(pc)
	// The caller sets it on the connection before anyone can evict pc
	// (which sets one in the past): an eviction is never undone.
	pc.deadline = time.Now().Add(s.RequestTimeout)
	return ""
}

// evictSlack: a process evicts only while it holds fewer than the most
// waiting connections of one process less an evictSlack-th of them.
const evictSlack = 8

// unread takes pc off the list of connections still sending their
// request, when it is on it. s.mu is held.
func (s *Server) unread(pc *conn) {
	if pc.elem == nil {
		return
	}
	l := s.reading[pc.pid]
	l.Remove(pc.elem)
	pc.elem = nil
	if l.Len() == 0 {
		delete(s.reading, pc.pid)
	}
}

// doneReading takes pc off the eviction list; false when it was evicted.
func (s *Server) doneReading(pc *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unread(pc)
	return !pc.evicted
}

func (s *Server) release(pc *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unread(pc)
	s.conns--
	if s.perPeer[pc.pid]--; s.perPeer[pc.pid] <= 0 {
		delete(s.perPeer, pc.pid)
	}
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
	_ = s.answer(c, Response{Error: &Refusal{Kind: kind, Message: msg, ExitStatus: 125}})
}

// answer writes resp within WriteTimeout (a client that reads nothing
// loses it).
func (s *Server) answer(c *net.UnixConn, resp Response) error {
	timeout := s.WriteTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	_ = c.SetWriteDeadline(time.Now().Add(timeout))
	// A refusal is small: no 64 KiB buffer for it (a flood of them
	// would make that garbage by the hundred MiB a second).
	size := 64 << 10
	if resp.Result == nil {
		size = 4 << 10
	}
	w := bufio.NewWriterSize(c, size)
	if err := writeResponse(w, resp); err != nil {
		return err
	}
	return w.Flush()
}

// refuseBatch is how many refused connections the accept loop holds
// before it answers and closes them (refusals).
const refuseBatch = 64

// refusals are the connections the accept loop refused and has not
// answered yet. Answering one (a send, then a close that wakes the
// client) costs about twice what deciding it does (accept4, getsockopt,
// the caps); the loop decides every connection the listen backlog holds
// (at most refuseBatch) before it answers the refused ones, so that an
// admitted connection behind a flood's is handed to its goroutine after
// the decisions only. Held ones count in Server.open, so the descriptor
// bound holds; they are answered before the loop waits again.
type refusals struct {
	held []heldRefusal
}

type heldRefusal struct {
	fd        int
	kind, msg string
}

// hold keeps fd to be refused with kind and msg at the next flush.
func (r *refusals) hold(open *atomic.Int64, fd int, kind, msg string) {
	open.Add(1)
	r.held = append(r.held, heldRefusal{fd, kind, msg})
}

// flush answers and closes the held refusals.
func (r *refusals) flush(open *atomic.Int64) {
	for i, h := range r.held {
		refuseFD(h.fd, h.kind, h.msg)
		r.held[i] = heldRefusal{}
	}
	open.Add(-int64(len(r.held)))
	r.held = r.held[:0]
}

// refuseFD answers a refusal with one send that does not wait (a new
// connection's empty socket buffer takes it whole; a client that filled
// its buffer already gets no answer), and closes fd.
func refuseFD(fd int, kind, msg string) {
	defer unix.Close(fd)
	sendRefusal(fd, kind, msg)
}

// sendRefusal sends a refusal on fd with one send that does not wait.
func sendRefusal(fd int, kind, msg string) {
	var b bytes.Buffer
	if writeResponse(&b, Response{Error: &Refusal{Kind: kind, Message: msg, ExitStatus: 125}}) != nil {
		return
	}
	_ = unix.Sendto(fd, b.Bytes(), unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
}

// handle serves one admitted connection (admitConn); the caller releases
// it from the caps and closes it.
func (s *Server) handle(ctx context.Context, pc *conn) {
	c, pid := pc.c, pc.pid
	endTurn := func() {}
	req, files, release, err := readRequest(c, s.readBudget(ctx, pid, pc.deadline, &endTurn))
	endTurn()
	if !s.doneReading(pc) {
		if err == nil {
			release()
			files.close()
		}
		s.refuse(c, "busy", fmt.Sprintf("the confine server at %s holds %d connections, its cap; this one sent no request in time", s.Socket, s.MaxConns))
		return
	}
	if err != nil {
		kind := "usage"
		if errors.Is(err, errBusy) {
			kind = "busy"
		}
		s.log().Warn("confine serve: refused a request", "peer_pid", pid, "err", err)
		s.refuse(c, kind, err.Error())
		return
	}
	defer release()
	defer files.close()
	if err := checkPeer(c, pid); err != nil {
		s.log().Warn("confine serve: refused a client inside a confined run", "peer_pid", pid, "err", err)
		release()
		s.refuse(c, "peer", err.Error())
		return
	}
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
	out, errw := newLiveWriter(files.Stdout, s.WriteTimeout, cancel), newLiveWriter(files.Stderr, s.WriteTimeout, cancel)
	if out != nil {
		files.Out = out
	}
	if errw != nil {
		files.Err = errw
	}
	defer out.finish()
	defer errw.finish()

	s.mu.Lock()
	busy := s.pending >= s.slots.size+s.MaxQueue
	if !busy {
		s.pending++
	}
	s.mu.Unlock()
	if busy {
		release()
		s.refuse(c, "busy", fmt.Sprintf("the confine server at %s is busy: %d runs going and %d waiting (--max-runs, --max-queue)", s.Socket, s.slots.size, s.MaxQueue))
		return
	}
	defer func() {
		s.mu.Lock()
		s.pending--
		s.mu.Unlock()
	}()
	// Slots go round the client processes in turn.
	if !s.slots.acquire(runCtx, pid) {
		release()
		s.refuse(c, "cancelled", "the client hung up while the run waited for a slot")
		return
	}
	resp := s.Handler(runCtx, req, files)
	// The slot is free before the output left and the answer are
	// written: a client that does not read them holds its connection,
	// never a run slot.
	s.slots.release()
	// So are the request's bytes (the request is done with): a client
	// that does not read its answer holds none of the budget.
	release()
	out.finish()
	errw.finish()
	files.close()
	if err := s.answer(c, resp); err != nil && runCtx.Err() == nil {
		s.log().Warn("confine serve: could not answer", "peer_pid", pid, "err", err)
	}
}

// readBudget returns readRequest's reserve for a request of n bytes from
// the process pid: it paces the request (per process, and the large ones
// of all processes together), takes a reading turn (one large request at a
// time) and reserves its bytes. *endTurn is set to end the turn it took.
func (s *Server) readBudget(ctx context.Context, pid int, deadline time.Time, endTurn *func()) func(n int64) (func(), error) {
	return func(n int64) (func(), error) {
		if err := s.rate.take(ctx, pid, n, deadline); err != nil {
			return nil, err
		}
		// Large requests of all processes together are paced too (a
		// flood from many processes); small ones never wait for them.
		if n > largeRequest {
			if err := s.largeRate.take(ctx, 0, n, deadline); err != nil {
				return nil, err
			}
		}
		turn, err := s.reads.acquire(ctx, pid, deadline)
		if err != nil {
			return nil, err
		}
		*endTurn = turn
		if n > largeRequest {
			// Decoding a large request takes a core for a while (about
			// 40 ns a byte): one at a time, so that floods of them
			// leave the other cores to everyone else.
			large, err := s.large.acquire(ctx, 1, deadline)
			if err != nil {
				turn()
				return nil, err
			}
			*endTurn = func() { large(); turn() }
		}
		return s.reserveMemory(ctx, n, deadline)
	}
}

// reserveMemory takes n bytes of the request budget, waiting for them
// until deadline, and returns the function that gives them back. Large
// requests leave smallReserve of the budget to the others: held until
// their runs end, four of them would otherwise take it all, and a small
// request would wait for one of those runs.
func (s *Server) reserveMemory(ctx context.Context, n int64, deadline time.Time) (func(), error) {
	if n <= largeRequest {
		return s.mem.acquire(ctx, n, deadline)
	}
	lm, err := s.largeMem.acquire(ctx, n, deadline)
	if err != nil {
		return nil, err
	}
	m, err := s.mem.acquire(ctx, n, deadline)
	if err != nil {
		lm()
		return nil, err
	}
	return func() { m(); lm() }, nil
}

// readRequest reads one framed request and the descriptors passed with
// it. reserve is asked for the request's bytes (the size its header
// claims) before they are read, which grow as they arrive; the returned
// release gives them back once the caller is done with the request.
func readRequest(c *net.UnixConn, reserve func(int64) (func(), error)) (*Request, Files, func(), error) {
	var hdr [4]byte
	oob := make([]byte, unix.CmsgSpace(3*4))
	n, oobn, flags, _, err := c.ReadMsgUnix(hdr[:], oob)
	var fds []int
	if oobn > 0 {
		fds = parseRights(oob[:oobn])
	}
	var files Files
	release := func() {}
	fail := func(err error) (*Request, Files, func(), error) {
		for _, fd := range fds {
			unix.Close(fd)
		}
		release()
		return nil, Files{}, nil, err
	}
	if err != nil && !(errors.Is(err, io.EOF) && n > 0) {
		if errors.Is(err, io.EOF) {
			return fail(fmt.Errorf("%w: the client sent no request", ErrProtocol))
		}
		return fail(fmt.Errorf("%w: reading the request: %v", ErrProtocol, err))
	}
	if flags&unix.MSG_CTRUNC != 0 {
		return fail(fmt.Errorf("%w: more than 3 descriptors passed", ErrProtocol))
	}
	if n < len(hdr) {
		if _, err := io.ReadFull(c, hdr[n:]); err != nil {
			return fail(fmt.Errorf("%w: short request header: %v", ErrProtocol, err))
		}
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > MaxRequest {
		return fail(fmt.Errorf("%w: request of %d bytes is over the limit of %d", ErrProtocol, size, MaxRequest))
	}
	if release, err = reserve(int64(size)); err != nil {
		release = func() {}
		return fail(err)
	}
	body, err := readBody(c, int(size))
	if err != nil {
		return fail(fmt.Errorf("%w: request cut short: %v", ErrProtocol, err))
	}
	req, err := decodeRequest(body)
	if err != nil {
		return fail(err)
	}
	if len(fds) != len(req.Files) {
		return fail(fmt.Errorf("%w: the request names %d passed descriptors, %d came", ErrProtocol, len(req.Files), len(fds)))
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
		fds = fds[i+1:]
		return fail(fmt.Errorf("%w: descriptor %q passed twice", ErrProtocol, name))
	}
	return req, files, release, nil
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
