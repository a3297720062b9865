//go:build linux

package probe

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"time"
)

// Egress vectors attack network = "allowlist" through the proxy the
// sandbox names in HTTP_PROXY / HTTPS_PROXY:
//
//	egress-request MODE HOST PORT ADDR [SNI]
//
// MODE is "connect" (HTTP CONNECT, then a TLS ClientHello for SNI,
// default HOST), "http" (a plain request for http://HOST:PORT/) or
// "socks" (SOCKS5 CONNECT to the name HOST, then the ClientHello). With
// no proxy variable set (the unconfined control) the same bytes go
// straight to ADDR, which must be loopback: the stand-in of HOST that
// the harness listens on. Whether anything reached it is for the harness
// to see; the probe reports what the proxy answered.
func addEgressVectors(m map[string]vector) {
	m["egress-request"] = vector{"connect|http|socks HOST PORT LOOPBACK-ADDR [SNI]", 4, 5, vEgressRequest}
}

func vEgressRequest(args []string) result {
	mode, host := args[0], args[1]
	port, bad := parsePort(args[2])
	if bad != nil {
		return *bad
	}
	addr, err := netip.ParseAddrPort(args[3])
	if err != nil || !addr.Addr().IsLoopback() {
		return usage("ADDR %q: want a loopback address:port", args[3])
	}
	sni := host
	if len(args) == 5 {
		sni = args[4]
	}
	proxyVar := "HTTPS_PROXY"
	switch mode {
	case "http":
		proxyVar = "HTTP_PROXY"
	case "connect", "socks":
	default:
		return usage("MODE %q: want connect, http or socks", mode)
	}
	target := net.JoinHostPort(host, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var d net.Dialer
	via := "direct to " + addr.String()
	dst := addr.String()
	if p := os.Getenv(proxyVar); p != "" {
		u, err := url.Parse(p)
		if err != nil {
			return usage("%s %q: %v", proxyVar, p, err)
		}
		pa, err := netip.ParseAddrPort(u.Host)
		if err != nil || !pa.Addr().IsLoopback() {
			return usage("%s %q: the probe talks to loopback proxies only", proxyVar, p)
		}
		via, dst = "through the proxy "+u.Host, u.Host
	}
	c, err := d.DialContext(ctx, "tcp", dst)
	if err != nil {
		return blocked("connect "+via, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	br := bufio.NewReader(c)
	proxied := dst != addr.String()
	if proxied {
		switch mode {
		case "connect":
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				return blocked("CONNECT "+target, err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return blockedf("CONNECT %s: %s (%s)", target, resp.Status, resp.Header.Get("X-Confine-Reason"))
			}
		case "socks":
			if r, ok := socksConnect(c, br, host, port); !ok {
				return r
			}
		}
	}
	if mode == "http" {
		uri := "/"
		if proxied {
			uri = "http://" + target + "/"
		}
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", uri, target)
		resp, err := http.ReadResponse(br, nil)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusForbidden {
				return blockedf("GET http://%s/ %s: %s (%s)", target, via, resp.Status, resp.Header.Get("X-Confine-Reason"))
			}
		}
		return escaped("sent GET http://%s/ %s", target, via)
	}
	// The ClientHello: nothing verifies the answer, the point is what
	// the bytes reach.
	tc := tls.Client(&bufConn{Conn: c, r: br}, &tls.Config{ServerName: sni, InsecureSkipVerify: true}) //nolint:gosec // a probe, no secret crosses
	herr := tc.HandshakeContext(ctx)
	return escaped("sent a TLS ClientHello for %q to %s %s (handshake: %v)", sni, target, via, herr)
}

// socksConnect negotiates a SOCKS5 CONNECT to the name host.
func socksConnect(c net.Conn, br *bufio.Reader, host string, port int) (result, bool) {
	if _, err := c.Write([]byte{5, 1, 0}); err != nil {
		return blocked("SOCKS greeting", err), false
	}
	var m [2]byte
	if _, err := readFull(br, m[:]); err != nil || m[1] != 0 {
		return blockedf("SOCKS greeting refused (% x, %v)", m, err), false
	}
	req := append([]byte{5, 1, 0, 3, byte(len(host))}, host...)
	req = binary.BigEndian.AppendUint16(req, uint16(port))
	if _, err := c.Write(req); err != nil {
		return blocked("SOCKS request", err), false
	}
	var rep [10]byte
	if _, err := readFull(br, rep[:]); err != nil {
		return blocked("SOCKS reply", err), false
	}
	if rep[1] != 0 {
		return blockedf("SOCKS CONNECT %s:%d refused with code %d", host, port, rep[1]), false
	}
	return result{}, true
}

func readFull(r *bufio.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// bufConn reads through the reader that already holds the proxy's reply.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }
