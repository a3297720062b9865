package egress

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/policy"
)

// Response headers of a denial.
const (
	HeaderReason          = "X-Confine-Reason"
	HeaderApprovalRequest = "X-Confine-Approval-Request"
)

// hopHeaders are connection-scoped and never forwarded (RFC 9110 7.6.1),
// with the proxy's own credentials header.
var hopHeaders = []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (s *session) http(ctx context.Context) {
	s.rec.Protocol = ProtoHTTP
	req, err := http.ReadRequest(s.br)
	if err != nil {
		s.unparsable("unparsable request (neither HTTP nor SOCKS5)", err)
		s.forbid(http.StatusBadRequest)
		return
	}
	if req.Method == http.MethodConnect {
		s.rec.Protocol = ProtoConnect
		s.connect(ctx, req)
		return
	}
	s.plain(ctx, req)
}

// schemePorts are the default ports of the schemes a plain request may
// name (an absolute URI without a port), for the record of its refusal.
var schemePorts = map[string]int{"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}

// splitHostPort splits "host:port"; without a port, def is used (def 0:
// the port is required).
func splitHostPort(hp string, def int) (string, int, error) {
	if host, ps, err := net.SplitHostPort(hp); err == nil {
		p, err := strconv.Atoi(ps)
		if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != ps {
			return "", 0, fmt.Errorf("bad port %q", ps)
		}
		return host, p, nil
	}
	switch {
	case def == 0:
		return "", 0, fmt.Errorf("%q: want host:port", hp)
	case strings.HasPrefix(hp, "[") && strings.HasSuffix(hp, "]"):
		return hp[1 : len(hp)-1], def, nil
	case strings.Contains(hp, ":"):
		return "", 0, fmt.Errorf("%q: an IPv6 address needs brackets", hp)
	}
	return hp, def, nil
}

// connect serves CONNECT host:port: the check, 200, then the
// ClientHello's SNI must equal host before anything is dialled.
func (s *session) connect(ctx context.Context, req *http.Request) {
	host, port, err := splitHostPort(req.RequestURI, 0)
	if err != nil {
		s.rec.Domain = req.RequestURI
		s.deny("bad CONNECT target: " + err.Error())
		s.forbid(http.StatusBadRequest)
		return
	}
	if err := s.check(ctx, host, port); err != nil {
		s.deny(trimDenied(err))
		s.forbid(http.StatusForbidden)
		return
	}
	if s.refuseTunnelToCredentialHost() {
		s.forbid(http.StatusForbidden)
		return
	}
	if _, err := s.client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		s.deny("client went away: " + err.Error())
		return
	}
	s.tunnel(ctx)
}

// tunnel reads the ClientHello, checks its SNI against the record's
// domain, dials the checked address and relays both ways.
func (s *session) tunnel(ctx context.Context) {
	s.lim.n.Store(maxHelloBytes + 1)
	sni, hello, err := peekHello(s.br)
	if err != nil {
		s.deny("tunnel refused: " + err.Error() + " (a tunnel must carry TLS to the host it named)")
		return
	}
	sni = strings.TrimSuffix(strings.ToLower(sni), ".")
	switch {
	case sni == s.rec.Domain:
	case sni == "" && isIPLiteral(s.rec.Domain):
		// Clients send no SNI for an address.
	default:
		s.deny(fmt.Sprintf("TLS server name %q differs from the tunnel's host %q (domain fronting)", sni, s.rec.Domain))
		return
	}
	up, err := s.dialChecked(ctx)
	if err != nil {
		s.rec.Reason += "; " + err.Error()
		s.allow()
		return
	}
	defer up.Close()
	s.relayBoth(up, hello)
	s.allow()
}

// plain forwards one plain-HTTP request (absolute URI or Host header) to
// its checked host, then closes.
func (s *session) plain(ctx context.Context, req *http.Request) {
	hostport := req.Host
	if req.URL.IsAbs() {
		if req.URL.Scheme != "http" {
			s.rec.Domain = req.URL.Host
			if h, p, err := splitHostPort(req.URL.Host, schemePorts[strings.ToLower(req.URL.Scheme)]); err == nil {
				if n, err := normalize(h); err == nil {
					h = n
				}
				s.rec.Domain, s.rec.Port = h, p
			}
			s.deny(fmt.Sprintf("scheme %q through a plain request (https goes through CONNECT)", req.URL.Scheme))
			s.forbid(http.StatusForbidden)
			return
		}
		// An absolute URI wins over the Host header (RFC 9112 3.2.2):
		// net/http's ReadRequest already dropped the header, and the
		// request is forwarded with the checked host as its Host.
		hostport = req.URL.Host
	}
	if hostport == "" {
		s.deny("plain HTTP request without a host")
		s.forbid(http.StatusBadRequest)
		return
	}
	host, port, err := splitHostPort(hostport, 80)
	if err != nil {
		s.rec.Domain = hostport
		s.deny("bad host: " + err.Error())
		s.forbid(http.StatusBadRequest)
		return
	}
	// A credential route: plain http://HOST/ (port 80) goes on over TLS
	// to the host's HTTPS port with the credential.
	if h, err := normalize(host); err == nil && port == 80 {
		if cred, ok := s.p.cfg.Credentials[h]; ok {
			port = cred.Port
			if err := s.check(ctx, host, port); err != nil {
				s.deny(trimDenied(err))
				s.forbid(http.StatusForbidden)
				return
			}
			s.forwardWithCredential(ctx, req, cred)
			return
		}
	}
	if err := s.check(ctx, host, port); err != nil {
		s.deny(trimDenied(err))
		s.forbid(http.StatusForbidden)
		return
	}
	up, err := s.dialChecked(ctx)
	if err != nil {
		s.badGateway("; " + err.Error())
		return
	}
	defer up.Close()
	s.client.SetReadDeadline(time.Time{})
	s.lim.n.Store(-1)
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.RequestURI = ""
	req.Host = hostport
	req.Close = true
	cu := &countConn{Conn: up}
	s.relay(req, cu, cu)
}

// relay writes req, its headers already prepared, to up, reads the
// answer, and writes it back to the client without its hop-by-hop
// headers. cu is the counted connection beneath up (up itself, or the
// one under the TLS session): the record's byte counts come from it.
func (s *session) relay(req *http.Request, up io.ReadWriter, cu *countConn) {
	if err := req.Write(up); err != nil {
		s.rec.BytesOut, s.rec.BytesIn = cu.out, cu.in
		s.rec.Reason += "; forwarding the request: " + err.Error()
		s.allow()
		return
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		s.rec.BytesOut, s.rec.BytesIn = cu.out, cu.in
		s.badGateway("; reading the response: " + err.Error())
		return
	}
	for _, h := range hopHeaders {
		if h != "Transfer-Encoding" {
			resp.Header.Del(h)
		}
	}
	resp.Close = true
	resp.Write(s.client)
	resp.Body.Close()
	s.rec.BytesOut, s.rec.BytesIn = cu.out, cu.in
	s.allow()
}

// badGateway records why the allowed request got no answer from the
// host (reason starts with "; ") and answers the client 502.
func (s *session) badGateway(reason string) {
	s.rec.Reason += reason
	s.allow()
	s.forbid(http.StatusBadGateway)
}

// dialChecked dials the address check chose, never the name again (a
// second lookup could answer otherwise).
func (s *session) dialChecked(ctx context.Context) (net.Conn, error) {
	if !s.addr.IsValid() {
		return nil, errors.New("no checked address")
	}
	return s.dial(ctx, s.addr)
}

// forbid answers a denied HTTP request with the reason and the approval
// request id, as headers and as text for a person.
func (s *session) forbid(code int) {
	reason := oneLine(s.rec.Reason)
	body := "confine: " + reason + "\n"
	if s.rec.ApprovalRequest != "" && s.rec.Verdict == "denied" {
		body += "confine: to allow it: confine approve " + s.rec.ApprovalRequest + " (then run with --approval TOKEN), or add " + net.JoinHostPort(s.rec.Domain, strconv.Itoa(s.rec.Port)) + " to the profile's [allowlist] hosts\n"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\n", code, http.StatusText(code))
	fmt.Fprintf(&b, "Content-Type: text/plain; charset=utf-8\r\n%s: %s\r\n", HeaderReason, reason)
	if s.rec.ApprovalRequest != "" {
		fmt.Fprintf(&b, "%s: %s\r\n", HeaderApprovalRequest, s.rec.ApprovalRequest)
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	s.client.SetWriteDeadline(time.Now().Add(s.p.cfg.HandshakeTimeout))
	s.client.Write([]byte(b.String()))
}

func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

func trimDenied(err error) string {
	return strings.TrimPrefix(err.Error(), ErrDenied.Error()+": ")
}

func isIPLiteral(h string) bool { return net.ParseIP(h) != nil }

func normalize(h string) (string, error) { return policy.NormalizeHost(h) }

// countConn counts payload bytes each way.
type countConn struct {
	net.Conn
	in, out int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in += int64(n)
	return n, err
}

func (c *countConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out += int64(n)
	return n, err
}
