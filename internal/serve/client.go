//go:build linux

package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Dial connects to the server at socket and checks, with SO_PEERCRED, that
// it runs as this process's euid: a socket another user answers on is
// refused (ErrPeer), as is a missing or dead one (ErrNoServer). Nothing
// here falls back to running without the server.
//
// A full listen backlog (a server under a flood of connections) is
// waited out, up to dialPatience, in the kernel (dialUnix).
func Dial(socket string) (*net.UnixConn, error) {
	c, err := dialUnix(socket)
	if err != nil {
		why := err
		var se *os.SyscallError
		if errors.As(err, &se) {
			why = se.Err
		}
		switch {
		case errors.Is(err, syscall.ENOENT):
			why = errors.New("no such socket (start one with `confine serve`)")
		case errors.Is(err, syscall.ECONNREFUSED):
			why = errors.New("nothing listens on it (the server is gone; start one with `confine serve`)")
		case errors.Is(err, syscall.EACCES):
			why = errors.New("permission denied (the socket or its directory belongs to another user)")
		}
		return nil, fmt.Errorf("%w at %s: %v", ErrNoServer, socket, why)
	}
	uid, pid, err := peerUID(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("%w at %s: its credentials: %v", ErrNoServer, socket, err)
	}
	if uid != os.Geteuid() {
		c.Close()
		return nil, fmt.Errorf("%w: the server at %s runs as uid %d, this client as uid %d", ErrPeer, socket, uid, os.Geteuid())
	}
	// A confined command that replaced the socket (its directory inside
	// the command's writable roots) would receive the request: refused
	// when the listener is visibly inside a run.
	if why := listenerInRun(pid); why != "" {
		c.Close()
		return nil, fmt.Errorf("%w: the socket at %s is served by a process inside a confined run (pid %d: %s)", ErrPeer, socket, pid, why)
	}
	return c, nil
}

// Do sends req over c (with files passed as SCM_RIGHTS, named in
// req.Files) and waits for the response. When ctx ends first, Do shuts
// down its writing half, which ends the run on the server, and still
// reads the answer (the result of the cancelled run). It closes c.
func Do(ctx context.Context, c *net.UnixConn, req *Request, files []*os.File) (*Response, error) {
	defer c.Close()
	if len(files) != len(req.Files) {
		return nil, fmt.Errorf("%w: %d descriptors for %d names", ErrProtocol, len(files), len(req.Files))
	}
	req.Version = Version
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	socket := c.RemoteAddr().String()
	var frame bufWriter
	if err := writeFrame(&frame, b); err != nil {
		return nil, err
	}
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	// The descriptors go with the first bytes; the rest follows.
	n, _, err := c.WriteMsgUnix(frame, oob, nil)
	if err == nil && n < len(frame) {
		_, err = c.Write(frame[n:])
	}
	sendErr := err
	stop := context.AfterFunc(ctx, func() { _ = c.CloseWrite() })
	defer stop()
	var resp Response
	dec := json.NewDecoder(bufio.NewReaderSize(c, 64<<10))
	if err := dec.Decode(&resp); err != nil {
		if sendErr != nil {
			// A server that refused at once (another uid, a full queue)
			// may have answered and closed before the request was in;
			// without an answer, the failed send is the news.
			return nil, fmt.Errorf("%w at %s: sending the request: %v", ErrNoServer, socket, sendErr)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("%w at %s: the server closed the connection without an answer (did it stop?)", ErrNoServer, socket)
		}
		return nil, fmt.Errorf("%w: the answer of %s: %v", ErrProtocol, socket, err)
	}
	if resp.Error == nil && resp.Result == nil {
		return nil, fmt.Errorf("%w: the answer of %s has neither a result nor an error", ErrProtocol, socket)
	}
	return &resp, nil
}

// dialPatience is how long Dial waits out a server's full backlog.
const dialPatience = 10 * time.Second

// dialUnix connects to socket with a blocking connect bounded by
// SO_SNDTIMEO (dialPatience): a full listen backlog is waited out in the
// kernel's queue of connecting clients, woken as the server accepts,
// instead of being retried after pauses, during which a flood of
// non-blocking connects can take every free place. EAGAIN: the backlog
// stayed full.
func dialUnix(socket string) (*net.UnixConn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	tv := unix.NsecToTimeval(dialPatience.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv); err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("setsockopt", err)
	}
	for end := time.Now().Add(dialPatience); ; {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: socket})
		if !errors.Is(err, unix.EINTR) || time.Now().After(end) {
			break
		}
	}
	if err == nil {
		// Writes on the connection are the poller's (non-blocking),
		// which SO_SNDTIMEO does not bound; cleared all the same.
		err = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &unix.Timeval{})
	}
	if err != nil {
		unix.Close(fd)
		return nil, os.NewSyscallError("connect", err)
	}
	f := os.NewFile(uintptr(fd), socket)
	c, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return nil, err
	}
	return c.(*net.UnixConn), nil
}

type bufWriter []byte

func (b *bufWriter) Write(p []byte) (int, error) {
	*b = append(*b, p...)
	return len(p), nil
}
