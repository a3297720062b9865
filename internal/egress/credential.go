package egress

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"strconv"
	"time"
)

// ProtoCredential marks a plain request the proxy sent on over TLS with
// a credential added (a credential route).
const ProtoCredential = "http+credential"

// Credential is what the proxy adds to requests for one host. The value
// comes from the caller, never from the sandbox.
type Credential struct {
	// Header and Value are set on every request (replacing the client's).
	Header, Value string
	// Port is the host's HTTPS port.
	Port int
	// Roots verify the host (nil: the system's).
	Roots *x509.CertPool
	// Env names where the value came from, for the records.
	Env string
}

// credential returns the route for the record's domain.
func (s *session) credential() (Credential, bool) {
	c, ok := s.p.cfg.Credentials[s.rec.Domain]
	return c, ok
}

// refuseTunnelToCredentialHost refuses a CONNECT or SOCKS tunnel to a
// credential route's host: there the command would speak TLS itself,
// with a credential of its own.
func (s *session) refuseTunnelToCredentialHost() bool {
	if _, ok := s.credential(); !ok {
		return false
	}
	s.deny(s.rec.Domain + " has a credential route: send plain http://" + s.rec.Domain + "/... through the proxy, which adds the credential (no tunnel there)")
	return true
}

// forwardWithCredential sends req, already checked, to the host over
// TLS with the credential set, and the answer back to the client.
func (s *session) forwardWithCredential(ctx context.Context, req *http.Request, cred Credential) {
	s.rec.Protocol = ProtoCredential
	up, err := s.dialChecked(ctx)
	if err != nil {
		s.badGateway("; " + err.Error())
		return
	}
	defer up.Close()
	cu := &countConn{Conn: up}
	tc := tls.Client(cu, &tls.Config{ServerName: s.rec.Domain, RootCAs: cred.Roots, MinVersion: tls.VersionTLS12})
	hctx, cancel := context.WithTimeout(ctx, s.p.cfg.HandshakeTimeout)
	err = tc.HandshakeContext(hctx)
	cancel()
	if err != nil {
		s.badGateway("; TLS to " + s.rec.Domain + ": " + err.Error())
		return
	}
	s.client.SetReadDeadline(time.Time{})
	s.lim.n.Store(-1)
	for _, h := range hopHeaders {
		req.Header.Del(h)
	}
	req.Header.Del(cred.Header)
	req.Header.Set(cred.Header, cred.Value)
	req.RequestURI = ""
	req.Host = s.rec.Domain
	if cred.Port != 443 {
		req.Host += ":" + strconv.Itoa(cred.Port)
	}
	req.URL.Scheme, req.URL.Host = "https", req.Host
	req.Close = true
	s.rec.Reason += "; credential from $" + cred.Env + " added over TLS"
	s.relay(req, tc, cu)
}
