package egress

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// TestProxyRecordsDestination: every record names its destination and
// protocol, whatever the client sent: SOCKS4 and SOCKS4a are refused at
// once (the proxy's handshake timeout is 30 s here: a proxy that waited
// for more would hang the test, not pass it), an absolute https:// URI is
// recorded with port 443, and a request the proxy cannot read is
// recorded as unparsable with its peer and byte count.
func TestProxyRecordsDestination(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:TLS"}, []string{"127.0.0.1/32"})
	tests := []struct {
		name      string
		send      string
		reply     string // a prefix of the answer
		protocol  string
		domain    string
		port      int
		reasonHas string
	}{
		{"socks4", "\x04\x01\x00\x50\x7f\x00\x00\x01user\x00", "\x00\x5b", ProtoSOCKS4, "127.0.0.1", 80, "not served"},
		{"socks4a", "\x04\x01\x01\xbb\x00\x00\x00\x01user\x00Allowed.TEST\x00", "\x00\x5b", ProtoSOCKS4a, "allowed.test", 443, "not served"},
		{"socks4 cut short", "\x04\x01\x00", "\x00\x5b", ProtoSOCKS4, "", 0, "short SOCKS4 request"},
		{"absolute https URI", "GET https://Evil.test/x HTTP/1.1\r\nHost: evil.test\r\n\r\n", "HTTP/1.1 403", ProtoHTTP, "evil.test", 443, "scheme"},
		{"absolute https URI with a port", "GET https://evil.test:8443/x HTTP/1.1\r\nHost: evil.test\r\n\r\n", "HTTP/1.1 403", ProtoHTTP, "evil.test", 8443, "scheme"},
		{"unparsable", "\x16\x03\x01 not a request\r\n\r\n", "HTTP/1.1 400", ProtoUnparsable, "", 0, "bytes from 127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", f.proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			if _, err := io.WriteString(c, tt.send); err != nil {
				t.Fatal(err)
			}
			if tt.name == "socks4 cut short" {
				// The rest never comes: the proxy answers at its
				// short SOCKS4 bound, not at the handshake timeout.
				_ = c.(*net.TCPConn).CloseWrite()
			}
			got := make([]byte, len(tt.reply))
			if _, err := io.ReadFull(c, got); err != nil || string(got) != tt.reply {
				t.Fatalf("answer %q, %v; want %q", got, err, tt.reply)
			}
			took := time.Since(start)
			r := f.record()
			if r.Verdict != spec.VerdictDenied || r.Protocol != tt.protocol || r.Domain != tt.domain || r.Port != tt.port ||
				!strings.Contains(r.Reason, tt.reasonHas) || !strings.HasPrefix(r.Peer, "127.0.0.1:") || r.RequestBytes <= 0 {
				t.Fatalf("record %+v; want denied %s %s:%d saying %q, with peer and request bytes", r, tt.protocol, tt.domain, tt.port, tt.reasonHas)
			}
			t.Logf("answered in %v: %s %s:%d (%d request bytes from %s): %s", took, r.Protocol, r.Domain, r.Port, r.RequestBytes, r.Peer, r.Reason)
		})
	}
}
