// Package egress is the launcher's egress proxy for network = "allowlist":
// the only destination a confined command can reach. It speaks HTTP
// CONNECT, plain HTTP (absolute URI or Host header) and SOCKS5 with
// remote names, checks the host against the profile's allowlist before
// any DNS lookup, resolves names itself, refuses results that are
// loopback, private, link-local (cloud metadata) or otherwise special
// unless the profile names them, connects to the checked address (never
// to the name again), requires a tunnel's TLS SNI to equal the host it
// asked for (no domain fronting; nothing is decrypted), and records one
// spec.Connection per connection, allowed or denied.
package egress

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Sentinel errors.
var (
	// ErrDenied: the destination is not allowed; the record says why.
	ErrDenied = errors.New("egress denied")
	// ErrConfig: the proxy was configured wrongly.
	ErrConfig = errors.New("egress proxy configuration")
)

// Protocols in spec.Connection.Protocol.
const (
	ProtoConnect = "http-connect"
	ProtoHTTP    = "http"
	ProtoSOCKS5  = "socks5"
	// ProtoSOCKS4 and ProtoSOCKS4a are refused at once (SOCKS4 resolves
	// names in the client; 4a is not served either).
	ProtoSOCKS4  = "socks4"
	ProtoSOCKS4a = "socks4a"
	// ProtoUnparsable marks a request the proxy could not read.
	ProtoUnparsable = "unparsable"
	// ProtoUnknown marks a client the run did not make.
	ProtoUnknown = "unknown"
)

// Resolver looks names up; *net.Resolver is one. Tests inject a map.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Config is what a Proxy needs.
type Config struct {
	// Allow is the compiled allowlist; nil denies everything.
	Allow *policy.CompiledAllowlist
	// Grants are verified approvals beyond the allowlist.
	Grants []policy.EgressGrant
	// Credentials are the credential routes by host, with their secrets
	// (from the caller's environment).
	Credentials map[string]Credential
	// Resolver resolves allowed names; nil means net.DefaultResolver.
	Resolver Resolver
	// Dial connects to a checked address ("tcp", "ip:port"); nil means a
	// net.Dialer. Tests use it to see what would have been contacted.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// RunID, TaskID and JobID go into every record.
	RunID, TaskID, JobID string
	// PIDOf names the process behind a client connection, when the
	// launcher knows it (the notify supervisor registers the source
	// port of each connect it makes for the command); nil or 0: unknown.
	PIDOf func(client net.Addr) int
	// KnownClientsOnly refuses clients PIDOf does not know: in a run,
	// only connections the supervisor made for the command (any other
	// process on the host could otherwise use the run's allowlist).
	KnownClientsOnly bool
	// Record receives each record when its connection ends (denied ones
	// at once); it is called from the connection's goroutine.
	Record func(spec.Connection)
	// HandshakeTimeout bounds reading a request or a ClientHello;
	// 0 means 30 s.
	HandshakeTimeout time.Duration
}

// maxRecords bounds the records a Proxy keeps for Connections.
const maxRecords = 4096

// maxHeaderBytes bounds an HTTP request head or a SOCKS request.
const maxHeaderBytes = 64 << 10

// Proxy is one run's egress proxy. It is safe for concurrent use.
type Proxy struct {
	cfg     Config
	mu      sync.Mutex
	records []spec.Connection
	dropped int
	wg      sync.WaitGroup
}

// New returns a proxy for cfg.
func New(cfg Config) (*Proxy, error) {
	for _, id := range []string{cfg.RunID, cfg.TaskID, cfg.JobID} {
		if err := spec.CheckAuditID(id); err != nil {
			return nil, fmt.Errorf("%w: id %q: %v", ErrConfig, id, err)
		}
	}
	if cfg.Resolver == nil {
		cfg.Resolver = net.DefaultResolver
	}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		cfg.Dial = d.DialContext
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = 30 * time.Second
	}
	return &Proxy{cfg: cfg}, nil
}

// Serve accepts clients on ln until ctx is done or ln fails, then closes
// ln and every open connection and waits for their records.
func (p *Proxy) Serve(ctx context.Context, ln net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	defer p.wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("egress proxy: accept: %w", err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(ctx, c)
		}()
	}
}

// Connections returns the records so far, oldest first, and how many
// were dropped beyond the bound.
func (p *Proxy) Connections() ([]spec.Connection, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]spec.Connection(nil), p.records...), p.dropped
}

func (p *Proxy) record(r spec.Connection) {
	p.mu.Lock()
	if len(p.records) < maxRecords {
		p.records = append(p.records, r)
	} else {
		p.dropped++
	}
	p.mu.Unlock()
	if p.cfg.Record != nil {
		p.cfg.Record(r)
	}
}

// session is one client connection being handled.
type session struct {
	p      *Proxy
	client net.Conn
	lim    *limitReader
	br     *bufio.Reader
	rec    spec.Connection
	// addr is the address check chose.
	addr netip.AddrPort
	// stops undo the context.AfterFunc registrations of the session.
	stops []func() bool
	// approvable: the refusal is the allowlist's, which an approval
	// lifts (the special-address rule is not).
	approvable bool
}

func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	lim := &limitReader{r: c}
	lim.n.Store(maxHeaderBytes)
	s := &session{p: p, client: c, lim: lim, br: bufio.NewReaderSize(lim, 4096)}
	defer func() {
		for _, f := range s.stops {
			f()
		}
	}()
	s.rec = spec.Connection{RunID: p.cfg.RunID, TaskID: p.cfg.TaskID, JobID: p.cfg.JobID, Start: time.Now().UTC()}
	s.rec.Peer = c.RemoteAddr().String()
	if p.cfg.PIDOf != nil {
		s.rec.PID = p.cfg.PIDOf(c.RemoteAddr())
	}
	if p.cfg.KnownClientsOnly && s.rec.PID == 0 {
		s.rec.Protocol = ProtoUnknown
		s.deny("client " + c.RemoteAddr().String() + " is not a connection the supervisor made for the command")
		return
	}
	c.SetReadDeadline(time.Now().Add(p.cfg.HandshakeTimeout))
	first, err := s.br.Peek(1)
	if err != nil {
		s.unparsable("no request", err)
		return
	}
	switch first[0] {
	case socksVersion:
		s.rec.Protocol = ProtoSOCKS5
		s.socks(ctx)
	case socks4Version:
		s.socks4()
	default:
		s.http(ctx)
	}
}

// requestBytes is how much of the request the proxy has read.
func (s *session) requestBytes() int64 {
	return s.lim.read.Load() - int64(s.br.Buffered())
}

// unparsable records a request the proxy could not read: what it got
// (so many bytes from the peer) and why.
func (s *session) unparsable(what string, err error) {
	if s.rec.Protocol == "" || s.rec.Protocol == ProtoHTTP {
		s.rec.Protocol = ProtoUnparsable
	}
	s.deny(fmt.Sprintf("%s: %v (%d bytes from %s)", what, err, s.requestBytes(), s.rec.Peer))
}

// deny completes a denial record: reason, a fresh approval request id.
func (s *session) deny(reason string) {
	s.rec.Verdict = spec.VerdictDenied
	s.rec.Reason = reason
	s.rec.RequestBytes = s.requestBytes()
	if s.rec.Domain != "" && s.rec.ApprovalRequest == "" {
		s.rec.ApprovalRequest = newRequestID()
		if s.approvable && s.rec.Hint != "" {
			s.rec.Hint = "confine approve " + s.rec.ApprovalRequest + " (then run with --approval TOKEN), or " + s.rec.Hint
		}
	}
	s.rec.Duration = time.Since(s.rec.Start)
	s.p.record(s.rec)
}

// newRequestID returns "req-" and 16 random hex digits.
func newRequestID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "req-unavailable"
	}
	return "req-" + hex.EncodeToString(b[:])
}

// check decides host:port: the allowlist first, then (for a name) the
// lookup and the special-address rule. It fills the record's domain,
// port and reason, and s.addr, the address to connect to.
func (s *session) check(ctx context.Context, host string, port int) error {
	ap, err := s.decide(ctx, host, port)
	s.addr = ap
	return err
}

func (s *session) decide(ctx context.Context, host string, port int) (netip.AddrPort, error) {
	s.rec.Domain, s.rec.Port = host, port
	h, err := policy.NormalizeHost(host)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("%w: bad host: %v", ErrDenied, err)
	}
	s.rec.Domain = h
	if port < 1 || port > 65535 {
		return netip.AddrPort{}, fmt.Errorf("%w: bad port %d", ErrDenied, port)
	}
	if entry, ok := s.p.cfg.Allow.Match(h, port); ok {
		s.rec.Reason = "allowlist entry " + strconv.Quote(entry)
	} else if g, ok := s.grant(h, port); ok {
		s.rec.ApprovalID = g.ID
		s.rec.Reason = "approval " + g.ID + " (" + g.Host + ":" + strconv.Itoa(g.Port) + ", until " + g.Expires.Format(time.RFC3339) + ")"
	} else {
		s.rec.Hint, s.approvable = hostsHint(h, port), true
		return netip.AddrPort{}, fmt.Errorf("%w: %s:%d is not in the profile's allowlist", ErrDenied, h, port)
	}
	if ip, err := netip.ParseAddr(h); err == nil {
		if why := special(ip); why != "" && !s.p.cfg.Allow.Names(ip) {
			s.rec.Hint = specialHint([]netip.Addr{ip})
			return netip.AddrPort{}, fmt.Errorf("%w: %s is %s and the profile does not name it", ErrDenied, ip, why)
		}
		return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
	}
	ips, pinned := s.p.cfg.Allow.Lookup(h)
	if !pinned {
		if ips, err = s.p.cfg.Resolver.LookupNetIP(ctx, "ip", h); err != nil {
			return netip.AddrPort{}, fmt.Errorf("%w: resolving %s: %v", ErrDenied, h, err)
		}
	}
	var refused []string
	var refusedIPs []netip.Addr
	for _, ip := range ips {
		ip = ip.Unmap()
		if why := special(ip); why != "" && !s.p.cfg.Allow.Names(ip) {
			refused = append(refused, ip.String()+" ("+why+")")
			refusedIPs = append(refusedIPs, ip)
			continue
		}
		return netip.AddrPortFrom(ip, uint16(port)), nil
	}
	if len(refused) == 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: %s has no address", ErrDenied, h)
	}
	// Allowed by name, refused by address: only special_addresses (never
	// an approval) lets it through.
	s.rec.Hint = specialHint(refusedIPs)
	return netip.AddrPort{}, fmt.Errorf("%w: %s resolves only to special addresses the profile does not name: %v", ErrDenied, h, refused)
}

// hostsHint is the fix for a host the allowlist does not name.
func hostsHint(host string, port int) string {
	return fmt.Sprintf("add %q to the profile's [allowlist] hosts", net.JoinHostPort(host, strconv.Itoa(port)))
}

// specialHint is the fix for allowed names whose addresses are special:
// the profile's special_addresses must name them (one address each).
func specialHint(ips []netip.Addr) string {
	q := make([]string, len(ips))
	for i, ip := range ips {
		q[i] = strconv.Quote(netip.PrefixFrom(ip, ip.BitLen()).String())
	}
	return "add special_addresses = [" + strings.Join(q, ", ") + "] to the profile's [allowlist] (an approval does not lift the special-address rule)"
}

// grant finds an unexpired approval for host:port.
func (s *session) grant(host string, port int) (policy.EgressGrant, bool) {
	for _, g := range s.p.cfg.Grants {
		if g.Matches(host, port) {
			return g, true
		}
	}
	return policy.EgressGrant{}, false
}

// dial connects to a checked address and fills the record.
func (s *session) dial(ctx context.Context, ap netip.AddrPort) (net.Conn, error) {
	s.rec.Address = ap.String()
	c, err := s.p.cfg.Dial(ctx, "tcp", ap.String())
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", ap, err)
	}
	// Serve's end closes the upstream side too, so that no copy waits on
	// a remote that keeps its side open.
	s.stops = append(s.stops, context.AfterFunc(ctx, func() { c.Close() }))
	return c, nil
}

// allow completes an allowed record after the connection ended.
func (s *session) allow() {
	s.rec.Verdict = spec.VerdictAllowed
	s.rec.Duration = time.Since(s.rec.Start)
	s.p.record(s.rec)
}

// relayBoth copies both ways until both directions end, counting
// payload bytes; pre is sent upstream first (the replayed ClientHello).
//
// The request phase read the client through a bufio.Reader over a
// limitReader; whatever that buffer still holds goes upstream next, and
// from then on io.Copy sees the bare connections on both sides, so that
// between two *net.TCPConn the kernel moves the bytes (splice(2)) and
// the proxy never copies them. The counts are io.Copy's return values
// (no wrapper that would hide the connections' types).
func (s *session) relayBoth(up net.Conn, pre []byte) {
	s.client.SetReadDeadline(time.Time{})
	s.lim.n.Store(-1)
	if n := s.br.Buffered(); n > 0 {
		b, _ := s.br.Peek(n)
		pre = append(pre, b...)
		s.br.Discard(n)
	}
	if len(pre) > 0 {
		n, err := up.Write(pre)
		s.rec.BytesOut += int64(n)
		if err != nil {
			return
		}
	}
	var out int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		out, _ = io.Copy(up, s.client)
		closeWrite(up)
	}()
	in, _ := io.Copy(s.client, up)
	closeWrite(s.client)
	<-done
	s.rec.BytesOut += out
	s.rec.BytesIn += in
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

// limitReader reads at most n more bytes while n >= 0 (the request
// phase); n < 0 is unlimited (the tunnel).
type limitReader struct {
	r io.Reader
	n atomic.Int64
	// read counts the bytes read while limited (the request).
	read atomic.Int64
}

var errTooLarge = errors.New("request head too large")

func (l *limitReader) Read(p []byte) (int, error) {
	n := l.n.Load()
	if n == 0 {
		return 0, errTooLarge
	}
	if n > 0 && int64(len(p)) > n {
		p = p[:n]
	}
	k, err := l.r.Read(p)
	if n > 0 {
		l.n.Add(-int64(k))
		l.read.Add(int64(k))
	}
	return k, err
}

// ProtoDirect marks a connect() the supervisor refused because it did not
// name the proxy (a program that ignores the proxy variables).
const ProtoDirect = "tcp-direct"

// RecordDirect records a direct connect to dst by process pid that the
// supervisor refused.
func (p *Proxy) RecordDirect(dst netip.AddrPort, pid int) {
	p.record(spec.Connection{
		RunID: p.cfg.RunID, TaskID: p.cfg.TaskID, JobID: p.cfg.JobID, PID: pid,
		Domain: dst.Addr().Unmap().String(), Port: int(dst.Port()), Protocol: ProtoDirect,
		Verdict: spec.VerdictDenied, Start: time.Now().UTC(),
		Reason: "direct connect refused: only the egress proxy is reachable (the program ignored HTTP_PROXY, HTTPS_PROXY and ALL_PROXY)",
	})
}
