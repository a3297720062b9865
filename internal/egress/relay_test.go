package egress

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// captureConn records what is written to it and fails every read: a TLS
// client on it writes its ClientHello and stops.
type captureConn struct {
	net.Conn
	w bytes.Buffer
}

func (c *captureConn) Write(p []byte) (int, error)      { return c.w.Write(p) }
func (c *captureConn) Read([]byte) (int, error)         { return 0, errors.New("capture only") }
func (c *captureConn) Close() error                     { return nil }
func (c *captureConn) SetDeadline(time.Time) error      { return nil }
func (c *captureConn) SetReadDeadline(time.Time) error  { return nil }
func (c *captureConn) SetWriteDeadline(time.Time) error { return nil }

// clientHello returns the bytes of a real ClientHello for name.
func clientHello(t *testing.T, name string) []byte {
	t.Helper()
	c := &captureConn{}
	tls.Client(c, &tls.Config{ServerName: name}).Handshake()
	if c.w.Len() == 0 || c.w.Bytes()[0] != 0x16 {
		t.Fatalf("no ClientHello captured: % x", c.w.Bytes())
	}
	return c.w.Bytes()
}

// TestTunnelByteCounts checks that an allowed tunnel's record counts
// exactly the payload each way, through CONNECT and SOCKS5: the
// ClientHello, what the client sent after it in the same write (held in
// the proxy's request buffer), and the relayed rest, against an upstream
// that counts what it received.
func TestTunnelByteCounts(t *testing.T) {
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	port := up.Addr().(*net.TCPAddr).Port
	const toUpstream, toClient = 3<<20 + 17, 5<<20 + 3
	got := make(chan int64, 1)
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			n, _ := io.Copy(io.Discard, c)
			got <- n
			io.CopyN(c, rand.Reader, toClient)
			c.Close()
		}
	}()
	f := newFixture(t, []string{"allowed.test:" + strconv.Itoa(port)}, []string{"127.0.0.1/32"})
	hello := clientHello(t, "allowed.test")
	payload := make([]byte, toUpstream)
	rand.Read(payload)
	for _, proto := range []string{ProtoConnect, ProtoSOCKS5} {
		t.Run(proto, func(t *testing.T) {
			f.t = t
			c, err := net.Dial("tcp", f.proxy)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			switch proto {
			case ProtoConnect:
				io.WriteString(c, "CONNECT allowed.test:"+strconv.Itoa(port)+" HTTP/1.1\r\n\r\n")
				// The answer is read byte by byte so nothing of the
				// tunnel is consumed here.
				want := "HTTP/1.1 200 Connection established\r\n\r\n"
				b := make([]byte, len(want))
				if _, err := io.ReadFull(c, b); err != nil || string(b) != want {
					t.Fatalf("CONNECT answer %q, %v", b, err)
				}
			case ProtoSOCKS5:
				req := append([]byte{5, 1, 0, 5, 1, 0, 3, byte(len("allowed.test"))}, "allowed.test"...)
				req = binary.BigEndian.AppendUint16(req, uint16(port))
				c.Write(req)
				var reply [12]byte
				if _, err := io.ReadFull(c, reply[:]); err != nil || reply[3] != socksOK {
					t.Fatalf("SOCKS reply % x, %v", reply, err)
				}
			}
			// The hello and the first payload bytes in one write: the
			// proxy reads past the hello into its buffer.
			first := append(append([]byte(nil), hello...), payload[:1000]...)
			if _, err := c.Write(first); err != nil {
				t.Fatal(err)
			}
			go func() {
				c.Write(payload[1000:])
				c.(*net.TCPConn).CloseWrite()
			}()
			in, err := io.Copy(io.Discard, c)
			if err != nil || in != toClient {
				t.Fatalf("client read %d, %v; want %d", in, err, toClient)
			}
			wantOut := int64(len(hello) + toUpstream)
			if n := <-got; n != wantOut {
				t.Fatalf("upstream received %d bytes; want %d", n, wantOut)
			}
			r := f.record()
			if r.Verdict != spec.VerdictAllowed || r.Protocol != proto || r.BytesOut != wantOut || r.BytesIn != toClient {
				t.Fatalf("record %+v; want %s allowed, bytes out %d, in %d", r, proto, wantOut, toClient)
			}
		})
	}
	f.t = t
}
