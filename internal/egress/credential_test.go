//go:build linux

package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// TestProxyCredentialRoute: a plain request for the route's host goes on
// over TLS with the caller's credential in place of the client's; a
// tunnel to that host is refused.
func TestProxyCredentialRoute(t *testing.T) {
	cert, pool, _, err := testutil.TLSCertificate("api.test")
	if err != nil {
		t.Fatal(err)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s %s", r.Host, r.URL.Path, r.Header.Get("Authorization"))
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	up.StartTLS()
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	allow, err := policy.Allowlist{Hosts: []string{"api.test:" + strconv.Itoa(port)}, Special: []string{"127.0.0.1/32"},
		Resolve:     map[string][]string{"api.test": {"127.0.0.1"}},
		Credentials: map[string]policy.CredentialRoute{"api.test": {Header: "Authorization", Env: "X", Port: port}}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	recs := make(chan spec.Connection, 8)
	p, err := New(Config{Allow: allow, PIDOf: func(net.Addr) int { return 1 }, Record: func(c spec.Connection) { recs <- c },
		Credentials: map[string]Credential{"api.test": {Header: "Authorization", Value: "Bearer caller-secret", Port: port, Roots: pool, Env: "X"}},
		Resolver:    &mapResolver{names: map[string][]netip.Addr{}}})
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
	defer func() { cancel(); <-done }()

	ask := func(req string) (*http.Response, string) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, req)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := ask("GET http://api.test/repos HTTP/1.1\r\nHost: api.test\r\nAuthorization: token the-commands-own\r\n\r\n")
	if resp.StatusCode != 200 || body != "api.test:"+strconv.Itoa(port)+" /repos Bearer caller-secret" {
		t.Fatalf("credential route: %d %q", resp.StatusCode, body)
	}
	if r := <-recs; r.Verdict != spec.VerdictAllowed || r.Protocol != ProtoCredential || !strings.Contains(r.Reason, "credential from $X") || strings.Contains(r.Reason, "caller-secret") {
		t.Fatalf("record %+v", r)
	}
	resp, _ = ask(fmt.Sprintf("CONNECT api.test:%d HTTP/1.1\r\n\r\n", port))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("CONNECT to a credential host: %s", resp.Status)
	}
	if r := <-recs; r.Verdict != spec.VerdictDenied || !strings.Contains(r.Reason, "credential route") {
		t.Fatalf("record %+v", r)
	}
}
