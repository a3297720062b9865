//go:build linux

package escape

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// egressProfile writes a network = "allowlist" profile into the work
// directory: allowed.test on port allowedPort and metadata.test on any
// port are allowed; allowed.test and denied.test are pinned to 127.0.0.1
// (which the profile names as a special address it may reach), and
// metadata.test to the cloud metadata address, which it does not name.
// It returns the `confine run` flags that select it.
func (e *env) egressProfile(allowedPort string) []string {
	e.t.Helper()
	p := filepath.Join(e.wd, "egress.toml")
	body := fmt.Sprintf(`name = "egress-escape"
network = "allowlist"
[allowlist]
hosts = ["allowed.test:%s", "metadata.test:*"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"allowed.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]
"metadata.test" = ["169.254.169.254"]
`, allowedPort)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	e.own(p, e.user.UID)
	return []string{"--profile", p}
}

// egressVectors attack network = "allowlist": everything but the proxy,
// and through the proxy everything but the allowed host. Each runs
// unconfined first (the control, where nothing stands in the way: the
// probe goes straight to the harness's listener) and then under the
// allowlist profile, where the harness's listener must see nothing.
func egressVectors() []vcase {
	// through is a request through the proxy (or, in the control,
	// straight to the stand-in listener); the harness's listener decides.
	through := func(mode, host string, port func(e *env) (string, *fx.Recorder), sni ...string) func(e *env) fixture {
		return func(e *env) fixture {
			p, r := port(e)
			args := append([]string{mode, host, p, "127.0.0.1:" + p}, sni...)
			// A fronted tunnel is cut after the ClientHello: the probe
			// cannot tell, the listener can.
			return fixture{args: args, cliArgs: e.egressProfile(p), effect: e.await(r), probeMayEscape: true, mustReport: len(sni) == 0}
		}
	}
	tcp4 := func(e *env) (string, *fx.Recorder) { return e.tcp4() }
	return []vcase{
		// A program that ignores the proxy variables (the probe is a
		// static Go binary) connecting to the allowed host's address.
		{name: "egress-direct-allowed-addr", vector: "tcp-connect", setup: func(e *env) fixture {
			p, r := e.tcp4()
			return fixture{args: []string{p}, cliArgs: e.egressProfile(p), effect: e.await(r)}
		}},
		{name: "egress-direct-ipv6", vector: "tcp6-connect", setup: func(e *env) fixture {
			port, r, err := e.tcpListener("tcp6", "[::1]:0")
			if err != nil {
				e.t.Skipf("not applicable on this host as %s: cannot listen on [::1]: %v", e.user.Name, err)
			}
			p := strconv.Itoa(port)
			return fixture{args: []string{p}, cliArgs: e.egressProfile(p), effect: e.await(r)}
		}},
		// A DNS query (or any datagram) to a resolver stand-in.
		{name: "egress-udp-resolver", vector: "udp-send", setup: func(e *env) fixture {
			pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				e.t.Fatal(err)
			}
			r := fx.PacketListener(pc, e.t.Cleanup)
			p := strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)
			return fixture{args: []string{p}, cliArgs: e.egressProfile(p), effect: e.await(r)}
		}},
		{name: "egress-mptcp", vector: "mptcp-connect", setup: func(e *env) fixture {
			p, r := e.tcp4()
			return fixture{args: []string{p}, cliArgs: e.egressProfile(p), effect: e.await(r)}
		}},
		{name: "egress-iouring-socket", vector: "iouring-socket", setup: func(e *env) fixture {
			p, r := e.tcp4()
			return fixture{args: []string{p}, cliArgs: e.egressProfile(p), effect: e.await(r)}
		}},
		{name: "egress-tcp-listen", vector: "tcp-listen", setup: func(e *env) fixture {
			return fixture{cliArgs: e.egressProfile("443")}
		}},
		// Through the proxy: a host outside the allowlist, by each
		// protocol the proxy speaks.
		{name: "egress-denied-connect", vector: "egress-request", setup: through("connect", "denied.test", tcp4)},
		{name: "egress-denied-http", vector: "egress-request", setup: through("http", "denied.test", tcp4)},
		{name: "egress-denied-socks", vector: "egress-request", setup: through("socks", "denied.test", tcp4)},
		// An IP literal (the allowed host's own address) and IPv6.
		{name: "egress-ip-literal", vector: "egress-request", setup: through("connect", "127.0.0.1", tcp4)},
		{name: "egress-ipv6-literal", vector: "egress-request", setup: func(e *env) fixture {
			port, r, err := e.tcpListener("tcp6", "[::1]:0")
			if err != nil {
				e.t.Skipf("not applicable on this host as %s: cannot listen on [::1]: %v", e.user.Name, err)
			}
			p := strconv.Itoa(port)
			return fixture{args: []string{"connect", "::1", p, "[::1]:" + p}, cliArgs: e.egressProfile(p), effect: e.await(r), probeMayEscape: true, mustReport: true}
		}},
		// Domain fronting: a tunnel to the allowed host carrying the TLS
		// server name of a denied one.
		{name: "egress-sni-fronting", vector: "egress-request", setup: through("connect", "allowed.test", tcp4, "denied.test")},
		// The cloud metadata service: allowed by name, refused by address
		// (the proxy never connects; the harness's stand-in listens on
		// loopback for the control).
		{name: "egress-metadata", vector: "egress-request", setup: through("connect", "metadata.test", tcp4)},
		// DNS exfiltration through the proxy: a name under a denied
		// domain is refused before any lookup.
		{name: "egress-dns-exfil", vector: "egress-request", setup: through("socks", "c2VjcmV0.exfil.test", tcp4)},
	}
}

// TestEscapeEgress runs the egress rows, as TestEscape runs the others
// (root and the unprivileged user; the simulated container gives the
// core alone).
func TestEscapeEgress(t *testing.T) {
	cases := egressVectors()
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, vc := range cases {
				t.Run(vc.name, func(t *testing.T) { runVector(t, u, vc, "") })
			}
		})
	}
}
