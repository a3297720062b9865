package egress

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"
)

// maxHelloBytes bounds what the proxy buffers while reading a ClientHello.
const maxHelloBytes = 64 << 10

// errHelloRead stops crypto/tls once it has parsed the ClientHello.
var errHelloRead = errors.New("client hello read")

// errNotTLS: the tunnel's first bytes are not a TLS handshake record.
var errNotTLS = errors.New("the tunnel does not start with a TLS ClientHello")

// peekHello reads the client's TLS ClientHello from r without answering
// it, using crypto/tls's own parser, and returns the server name it asks
// for ("" when it sends none) and every byte read, to be replayed to the
// upstream host. Nothing is decrypted or intercepted.
func peekHello(r io.Reader) (sni string, read []byte, err error) {
	var buf bytes.Buffer
	tee := io.TeeReader(io.LimitReader(r, maxHelloBytes), &buf)
	var first [1]byte
	if _, err := io.ReadFull(tee, first[:]); err != nil {
		return "", buf.Bytes(), err
	}
	if first[0] != 0x16 { // TLS handshake record
		return "", buf.Bytes(), errNotTLS
	}
	got := false
	cfg := &tls.Config{GetConfigForClient: func(h *tls.ClientHelloInfo) (*tls.Config, error) {
		sni, got = h.ServerName, true
		return nil, errHelloRead
	}}
	c := tls.Server(&helloConn{r: io.MultiReader(bytes.NewReader(first[:]), tee)}, cfg)
	herr := c.Handshake()
	if !got {
		if herr == nil {
			herr = errNotTLS
		}
		return "", buf.Bytes(), herr
	}
	return sni, buf.Bytes(), nil
}

// helloConn is a net.Conn that only reads: crypto/tls never gets to write
// an alert to the client, which the proxy answers itself.
type helloConn struct{ r io.Reader }

func (h *helloConn) Read(p []byte) (int, error)       { return h.r.Read(p) }
func (h *helloConn) Write(p []byte) (int, error)      { return len(p), nil }
func (h *helloConn) Close() error                     { return nil }
func (h *helloConn) LocalAddr() net.Addr              { return &net.TCPAddr{} }
func (h *helloConn) RemoteAddr() net.Addr             { return &net.TCPAddr{} }
func (h *helloConn) SetDeadline(time.Time) error      { return nil }
func (h *helloConn) SetReadDeadline(time.Time) error  { return nil }
func (h *helloConn) SetWriteDeadline(time.Time) error { return nil }
