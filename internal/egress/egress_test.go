package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// testCA is a throw-away CA and a leaf for the test names.
type testCA struct {
	pool *x509.CertPool
	leaf tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "confine egress test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "allowed.test"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		DNSNames:    []string{"allowed.test", "denied.test", "also.test"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCA{pool: pool, leaf: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// mapResolver answers from a table and remembers every name asked.
type mapResolver struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	asked []string
}

func (m *mapResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.asked = append(m.asked, host)
	if a, ok := m.names[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

func (m *mapResolver) wasAsked(host string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.asked {
		if strings.Contains(a, host) {
			return true
		}
	}
	return false
}

// fixture is a proxy in front of a TLS and a plain HTTP server on
// loopback, with records delivered on a channel.
type fixture struct {
	t        *testing.T
	ca       testCA
	proxy    string // host:port
	tlsPort  int
	httpPort int
	res      *mapResolver
	records  chan spec.Connection
	mu       sync.Mutex
	dialled  []string
}

func newFixture(t *testing.T, hosts []string, special []string, grants ...func(tlsPort int) policy.EgressGrant) *fixture {
	t.Helper()
	f := &fixture{t: t, ca: newTestCA(t), records: make(chan spec.Connection, 64)}
	tlsSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s", r.Host)
	}))
	tlsSrv.TLS = &tls.Config{Certificates: []tls.Certificate{f.ca.leaf}}
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	plainSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "plain hello from %s %s", r.Host, r.URL.Path)
	}))
	t.Cleanup(plainSrv.Close)
	f.tlsPort = tlsSrv.Listener.Addr().(*net.TCPAddr).Port
	f.httpPort = plainSrv.Listener.Addr().(*net.TCPAddr).Port
	lo := []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	f.res = &mapResolver{names: map[string][]netip.Addr{
		"allowed.test":   lo,
		"denied.test":    lo,
		"also.test":      lo,
		"unnamed.test":   {netip.MustParseAddr("127.0.0.2")},
		"metadata.test":  {netip.MustParseAddr("169.254.169.254")},
		"private.test":   {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")},
		"rebinding.test": {netip.MustParseAddr("::ffff:169.254.169.254")},
	}}
	for i := range hosts {
		hosts[i] = strings.NewReplacer("TLS", strconv.Itoa(f.tlsPort), "HTTP", strconv.Itoa(f.httpPort)).Replace(hosts[i])
	}
	var gs []policy.EgressGrant
	for _, g := range grants {
		gs = append(gs, g(f.tlsPort))
	}
	allow, err := policy.Allowlist{Hosts: hosts, Special: special}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{
		Allow: allow, Grants: gs, Resolver: f.res, RunID: "run1", TaskID: "task1", JobID: "job1",
		PIDOf:  func(net.Addr) int { return 4242 },
		Record: func(c spec.Connection) { f.records <- c },
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			f.mu.Lock()
			f.dialled = append(f.dialled, addr)
			f.mu.Unlock()
			// Loopback only: anything else is a failure of the proxy's
			// checks, and is never contacted.
			if ap, err := netip.ParseAddrPort(addr); err != nil || !ap.Addr().IsLoopback() {
				t.Errorf("proxy dialled %s", addr)
				return nil, errors.New("test refuses a non-loopback dial")
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.proxy = ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return f
}

// client is an HTTP client through the proxy (scheme "http" or "socks5").
func (f *fixture) client(scheme string) *http.Client {
	pu := &url.URL{Scheme: scheme, Host: f.proxy}
	return &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(pu),
		TLSClientConfig:   &tls.Config{RootCAs: f.ca.pool},
		DisableKeepAlives: true,
		// Names are never resolved by the client: a test name that
		// reached a real resolver would fail here.
		DialContext: (&net.Dialer{}).DialContext,
	}}
}

func (f *fixture) get(scheme, target string) (string, int, error) {
	resp, err := f.client(scheme).Get(target)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), resp.StatusCode, err
}

func (f *fixture) record() spec.Connection {
	f.t.Helper()
	select {
	case r := <-f.records:
		return r
	case <-f.t.Context().Done():
		f.t.Fatal("no record")
	}
	return spec.Connection{}
}

func (f *fixture) wasDialled(port int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, d := range f.dialled {
		if strings.HasSuffix(d, ":"+strconv.Itoa(port)) {
			return true
		}
	}
	return false
}

func (f *fixture) url(scheme, host string) string {
	port := f.tlsPort
	if scheme == "http" {
		port = f.httpPort
	}
	return fmt.Sprintf("%s://%s/", scheme, net.JoinHostPort(host, strconv.Itoa(port)))
}

func TestProxyVerdicts(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:TLS", "allowed.test:HTTP", "metadata.test:*", "private.test:*", "unnamed.test:*", "rebinding.test:*", "127.0.0.1:HTTP", "also.test:TLS"}, nil)
	tests := []struct {
		name     string
		proxy    string // "http" or "socks5"
		url      string
		wantBody string // "" = must fail
		verdict  string
		reason   string
		proto    string
		hint     string // what the record's Hint must hold ("" for none)
	}{
		{"CONNECT allowed", "http", f.url("https", "allowed.test"), "hello from allowed.test", spec.VerdictAllowed, `allowlist entry "allowed.test:`, ProtoConnect, ""},
		{"CONNECT denied", "http", f.url("https", "denied.test"), "", spec.VerdictDenied, "not in the profile's allowlist", ProtoConnect, `add "denied.test:`},
		{"plain allowed", "http", f.url("http", "allowed.test"), "plain hello from allowed.test:", spec.VerdictAllowed, "allowlist entry", ProtoHTTP, ""},
		{"plain denied", "http", f.url("http", "denied.test"), "", spec.VerdictDenied, "not in the profile's allowlist", ProtoHTTP, `add "denied.test:`},
		{"SOCKS allowed", "socks5", f.url("https", "allowed.test"), "hello from allowed.test", spec.VerdictAllowed, "allowlist entry", ProtoSOCKS5, ""},
		{"SOCKS denied", "socks5", f.url("https", "denied.test"), "", spec.VerdictDenied, "not in the profile's allowlist", ProtoSOCKS5, `add "denied.test:`},
		{"metadata name", "http", f.url("https", "metadata.test"), "", spec.VerdictDenied, "169.254.169.254 (link-local (cloud metadata", ProtoConnect, `special_addresses = ["169.254.169.254/32"]`},
		{"metadata literal", "http", "https://169.254.169.254/", "", spec.VerdictDenied, "not in the profile's allowlist", ProtoConnect, `add "169.254.169.254:443" to the profile's [allowlist] hosts`},
		{"mapped metadata", "http", f.url("https", "rebinding.test"), "", spec.VerdictDenied, "169.254.169.254", ProtoConnect, `special_addresses = ["169.254.169.254/32"]`},
		{"private", "http", f.url("https", "private.test"), "", spec.VerdictDenied, "10.0.0.1 (private)", ProtoConnect, `special_addresses = ["10.0.0.1/32", "fd00::1/128"]`},
		{"loopback not named", "socks5", f.url("https", "unnamed.test"), "", spec.VerdictDenied, "127.0.0.2 (loopback)", ProtoSOCKS5, `special_addresses = ["127.0.0.2/32"]`},
		{"IP literal named", "http", f.url("http", "127.0.0.1"), "plain hello from 127.0.0.1:", spec.VerdictAllowed, `"127.0.0.1:`, ProtoHTTP, ""},
		{"IP literal other port", "http", f.url("https", "127.0.0.1"), "", spec.VerdictDenied, "not in the profile's allowlist", ProtoConnect, `add "127.0.0.1:`},
		{"IPv6 literal", "http", f.url("https", "::1"), "", spec.VerdictDenied, "::1", ProtoConnect, `add "[::1]:`},
		{"SOCKS IPv6 literal", "socks5", f.url("https", "::1"), "", spec.VerdictDenied, "not in the profile's allowlist", ProtoSOCKS5, `add "[::1]:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.t = t
			body, code, err := f.get(tt.proxy, tt.url)
			if tt.wantBody != "" {
				if err != nil || code != 200 || !strings.HasPrefix(body, tt.wantBody) {
					t.Fatalf("GET %s through %s: %d %q %v; want 200 %q", tt.url, tt.proxy, code, body, err, tt.wantBody)
				}
			} else if err == nil && code == 200 {
				t.Fatalf("GET %s through %s succeeded: %q", tt.url, tt.proxy, body)
			}
			r := f.record()
			if r.Verdict != tt.verdict || !strings.Contains(r.Reason, tt.reason) || r.Protocol != tt.proto {
				t.Fatalf("record %+v; want verdict %s, reason containing %q, protocol %s", r, tt.verdict, tt.reason, tt.proto)
			}
			// The hint names the rule that refused: hosts, or
			// special_addresses for an allowed name at a special address.
			if (tt.hint == "") != (r.Hint == "") || !strings.Contains(r.Hint, tt.hint) {
				t.Fatalf("record hint %q; want one containing %q", r.Hint, tt.hint)
			}
			if r.RunID != "run1" || r.TaskID != "task1" || r.JobID != "job1" || r.PID != 4242 || r.Port == 0 || r.Domain == "" {
				t.Fatalf("record lacks ids: %+v", r)
			}
			if tt.verdict == spec.VerdictAllowed && (r.BytesIn == 0 || r.BytesOut == 0 || r.Address == "") {
				t.Fatalf("allowed record without bytes or address: %+v", r)
			}
			if tt.verdict == spec.VerdictDenied && (r.ApprovalRequest == "" || r.Address != "" || r.BytesIn+r.BytesOut != 0) {
				t.Fatalf("denied record: %+v; want an approval request, no address, no bytes", r)
			}
		})
	}
	f.t = t
	if f.res.wasAsked("denied.test") || f.res.wasAsked("169.254") {
		t.Fatalf("a denied name reached the resolver: %v", f.res.asked)
	}
}

// rawConnect opens a CONNECT tunnel by hand and returns the response head.
func rawConnect(t *testing.T, proxy, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("tcp", proxy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestProxyDenialNamesApproval(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:TLS"}, []string{"127.0.0.1/32"})
	_, resp := rawConnect(t, f.proxy, "denied.test:443")
	body, _ := io.ReadAll(resp.Body)
	r := f.record()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(HeaderApprovalRequest) != r.ApprovalRequest ||
		!strings.Contains(resp.Header.Get(HeaderReason), "not in the profile's allowlist") ||
		!strings.Contains(string(body), "confine approve "+r.ApprovalRequest) || !strings.Contains(string(body), "[allowlist]") {
		t.Fatalf("denial: %d %v %q; record %+v", resp.StatusCode, resp.Header, body, r)
	}
}

func TestProxyDomainFronting(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:TLS"}, []string{"127.0.0.1/32"})
	target := net.JoinHostPort("allowed.test", strconv.Itoa(f.tlsPort))
	c, resp := rawConnect(t, f.proxy, target)
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT allowed.test: %s", resp.Status)
	}
	// The tunnel names allowed.test; the TLS inside asks for denied.test,
	// which the upstream (serving both) would happily answer.
	tc := tls.Client(c, &tls.Config{ServerName: "denied.test", RootCAs: f.ca.pool})
	if err := tc.Handshake(); err == nil {
		t.Fatal("a fronted handshake went through")
	}
	r := f.record()
	if r.Verdict != spec.VerdictDenied || !strings.Contains(r.Reason, "domain fronting") {
		t.Fatalf("record %+v", r)
	}
	if f.wasDialled(f.tlsPort) {
		t.Fatal("the proxy contacted the upstream for a fronted tunnel")
	}

	// The control: the same upstream answers denied.test when reached
	// directly, so the refusal above is the proxy's.
	d, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(f.tlsPort)), &tls.Config{ServerName: "denied.test", RootCAs: f.ca.pool})
	if err != nil {
		t.Fatalf("control: %v", err)
	}
	d.Close()
}

func TestProxyTunnelNeedsTLS(t *testing.T) {
	f := newFixture(t, []string{"allowed.test:HTTP"}, []string{"127.0.0.1/32"})
	c, resp := rawConnect(t, f.proxy, net.JoinHostPort("allowed.test", strconv.Itoa(f.httpPort)))
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: denied.test\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("a plain request inside a tunnel got %q", b)
	}
	if r := f.record(); r.Verdict != spec.VerdictDenied || !strings.Contains(r.Reason, "TLS") {
		t.Fatalf("record %+v", r)
	}
}

func TestProxyHostHeaderMismatch(t *testing.T) {
	// An absolute URI naming allowed.test with a Host header naming
	// denied.test: the upstream must see only the checked host.
	f := newFixture(t, []string{"allowed.test:HTTP"}, []string{"127.0.0.1/32"})
	c, err := net.Dial("tcp", f.proxy)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET http://allowed.test:%d/ HTTP/1.1\r\nHost: denied.test\r\n\r\n", f.httpPort)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), "plain hello from allowed.test:") {
		t.Fatalf("upstream saw %d %q; want the checked host", resp.StatusCode, body)
	}
	if r := f.record(); r.Verdict != spec.VerdictAllowed || r.Domain != "allowed.test" {
		t.Fatalf("record %+v", r)
	}
}

func TestProxyOriginFormUsesHost(t *testing.T) {
	// A program that ignores the proxy variables but lands on the proxy
	// (the supervisor connects every inet socket there) sends origin-form
	// requests: the Host header is what is checked.
	f := newFixture(t, []string{"allowed.test:HTTP"}, []string{"127.0.0.1/32"})
	for _, tt := range []struct {
		host string
		code int
	}{{"allowed.test:" + strconv.Itoa(f.httpPort), 200}, {"denied.test:" + strconv.Itoa(f.httpPort), 403}} {
		c, err := net.Dial("tcp", f.proxy)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: %s\r\n\r\n", tt.host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != tt.code {
			t.Fatalf("Host %s: %v %v; want %d", tt.host, resp, err, tt.code)
		}
		f.record()
	}
}

func TestProxySOCKSRefusesOtherCommands(t *testing.T) {
	f := newFixture(t, []string{"*:*"}, nil)
	for _, cmd := range []byte{2, 3} { // BIND, UDP ASSOCIATE
		c, err := net.Dial("tcp", f.proxy)
		if err != nil {
			t.Fatal(err)
		}
		req := []byte{5, 1, 0, 5, cmd, 0, 1, 127, 0, 0, 1, 0, 0}
		binary.BigEndian.PutUint16(req[len(req)-2:], 53)
		c.Write(req)
		var reply [12]byte
		if _, err := io.ReadFull(c, reply[:]); err != nil || reply[3] != socksCmdNotSupport {
			t.Fatalf("SOCKS command %d: reply % x, %v", cmd, reply, err)
		}
		c.Close()
		if r := f.record(); r.Verdict != spec.VerdictDenied || !strings.Contains(r.Reason, "only CONNECT") {
			t.Fatalf("record %+v", r)
		}
	}
}

func TestProxyNamedSpecial(t *testing.T) {
	// A profile that names 127.0.0.0/8 lets a name resolve to loopback.
	f := newFixture(t, []string{"unnamed.test:*", "allowed.test:TLS"}, []string{"127.0.0.0/8"})
	body, code, err := f.get("http", f.url("https", "allowed.test"))
	if err != nil || code != 200 || !strings.HasPrefix(body, "hello") {
		t.Fatalf("%d %q %v", code, body, err)
	}
	if r := f.record(); r.Verdict != spec.VerdictAllowed {
		t.Fatalf("record %+v", r)
	}
}

func TestSpecial(t *testing.T) {
	for _, tt := range []struct {
		ip   string
		want bool
	}{
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"2606:4700::1111", false},
		{"127.0.0.1", true}, {"10.1.2.3", true}, {"172.16.0.1", true}, {"192.168.1.1", true},
		{"169.254.169.254", true}, {"100.64.0.1", true}, {"0.0.0.0", true}, {"0.1.2.3", true},
		{"224.0.0.1", true}, {"255.255.255.255", true}, {"::1", true}, {"::", true}, {"fe80::1", true},
		{"fd00::1", true}, {"::ffff:127.0.0.1", true}, {"64:ff9b::a9fe:a9fe", true}, {"2002:a9fe:a9fe::1", true},
		{"fd00:ec2::254", true}, {"198.18.0.1", true}, {"240.0.0.1", true},
	} {
		if got := special(netip.MustParseAddr(tt.ip)) != ""; got != tt.want {
			t.Errorf("special(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	for _, tt := range []struct {
		in   string
		def  int
		host string
		port int
		ok   bool
	}{
		{"a.test:443", 0, "a.test", 443, true},
		{"a.test", 0, "", 0, false},
		{"a.test", 80, "a.test", 80, true},
		{"[::1]:8080", 0, "::1", 8080, true},
		{"[::1]", 80, "::1", 80, true},
		{"::1", 80, "", 0, false},
		{"a.test:0", 0, "", 0, false},
		{"a.test:065", 0, "", 0, false},
		{"a.test:70000", 0, "", 0, false},
	} {
		h, p, err := splitHostPort(tt.in, tt.def)
		if (err == nil) != tt.ok || h != tt.host || p != tt.port {
			t.Errorf("splitHostPort(%q, %d) = %q, %d, %v", tt.in, tt.def, h, p, err)
		}
	}
}

func TestProxyGrants(t *testing.T) {
	// Grants are verified by policy (signature, scope); the proxy
	// matches host and port, and the expiry at connection time.
	f := newFixture(t, []string{"allowed.test:1"}, []string{"127.0.0.1/32"},
		func(p int) policy.EgressGrant {
			return policy.EgressGrant{ID: "apv-1", Host: "denied.test", Port: p, Expires: time.Now().Add(time.Hour)}
		},
		func(p int) policy.EgressGrant {
			return policy.EgressGrant{ID: "apv-old", Host: "also.test", Port: p, Expires: time.Now().Add(-time.Minute)}
		})
	body, code, err := f.get("http", f.url("https", "denied.test"))
	if err != nil || code != 200 || !strings.HasPrefix(body, "hello from denied.test") {
		t.Fatalf("granted host: %d %q %v", code, body, err)
	}
	if r := f.record(); r.Verdict != spec.VerdictAllowed || r.ApprovalID != "apv-1" || !strings.Contains(r.Reason, "approval apv-1") {
		t.Fatalf("record %+v", r)
	}
	if _, _, err := f.get("http", f.url("https", "also.test")); err == nil {
		t.Fatal("an expired grant let a host through")
	}
	if r := f.record(); r.Verdict != spec.VerdictDenied || r.ApprovalID != "" {
		t.Fatalf("record %+v", r)
	}
}

func TestProxyKnownClientsOnly(t *testing.T) {
	allow, err := policy.Allowlist{Hosts: []string{"*:*"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	recs := make(chan spec.Connection, 1)
	p, err := New(Config{Allow: allow, KnownClientsOnly: true, PIDOf: func(net.Addr) int { return 0 },
		Record: func(c spec.Connection) { recs <- c },
		Dial: func(context.Context, string, string) (net.Conn, error) {
			t.Error("the proxy dialled for an unknown client")
			return nil, errors.New("no")
		}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx, ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "CONNECT a.test:443 HTTP/1.1\r\n\r\n")
	if b, _ := io.ReadAll(c); len(b) != 0 {
		t.Fatalf("an unknown client got %q", b)
	}
	c.Close()
	if r := <-recs; r.Verdict != spec.VerdictDenied || !strings.Contains(r.Reason, "not a connection the supervisor made") {
		t.Fatalf("record %+v", r)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
