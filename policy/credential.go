package policy

import (
	"fmt"
	"net/textproto"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// CredentialRoute is a host for which the egress proxy adds a credential
// on the way out, so that the secret never enters the sandbox: the
// command sends plain HTTP for http://HOST/... through the proxy (a
// local, credential-free route), and the proxy makes the request over
// TLS to HOST:443 with the header set from the caller's environment.
// CONNECT and SOCKS to such a host are refused, so the command cannot
// use a token of its own there.
type CredentialRoute struct {
	// Header is the request header to set ("Authorization").
	Header string `json:"header"`
	// Env names the variable of the caller's (the launcher's)
	// environment that holds the secret; a run is refused without it.
	Env string `json:"env"`
	// Prefix goes before the secret ("Bearer ", "token ").
	Prefix string `json:"prefix,omitempty"`
	// CAFile, when set, is a PEM file of extra roots the proxy trusts
	// for this host (an internal service with a private CA).
	CAFile string `json:"ca_file,omitempty"`
	// Port is the host's HTTPS port; 0 means 443.
	Port int `json:"port,omitempty"`
}

// UpstreamPort is r.Port or 443.
func (r CredentialRoute) UpstreamPort() int {
	if r.Port == 0 {
		return 443
	}
	return r.Port
}

// checkCredential validates one route for host.
func checkCredential(host string, r CredentialRoute) error {
	h, err := NormalizeHost(host)
	if err != nil || h != host {
		return fmt.Errorf("credentials %q: want a normalised host name", host)
	}
	if r.Header == "" || textproto.CanonicalMIMEHeaderKey(r.Header) == "" || strings.ContainsAny(r.Header, " :\r\n") {
		return fmt.Errorf("credentials %q: header %q is not a header name", host, r.Header)
	}
	switch textproto.CanonicalMIMEHeaderKey(r.Header) {
	case "Host", "Content-Length", "Transfer-Encoding", "Connection":
		return fmt.Errorf("credentials %q: header %q cannot carry a credential", host, r.Header)
	}
	if err := checkEnvName(r.Env); err != nil {
		return fmt.Errorf("credentials %q: env: %v", host, trimSentinel(err))
	}
	if strings.ContainsAny(r.Prefix, "\r\n") {
		return fmt.Errorf("credentials %q: prefix holds a line break", host)
	}
	if r.Port < 0 || r.Port > 65535 {
		return fmt.Errorf("credentials %q: port %d: want 1-65535", host, r.Port)
	}
	if r.CAFile != "" {
		if err := checkPathSyntax(r.CAFile); err != nil {
			return fmt.Errorf("credentials %q: ca_file: %v", host, err)
		}
	}
	return nil
}

// Credential returns the route for host, if the profile has one.
func (c *CompiledAllowlist) Credential(host string) (CredentialRoute, bool) {
	if c == nil {
		return CredentialRoute{}, false
	}
	r, ok := c.creds[host]
	return r, ok
}

// CredentialRoutes returns every route by host.
func (c *CompiledAllowlist) CredentialRoutes() map[string]CredentialRoute {
	out := map[string]CredentialRoute{}
	if c != nil {
		for h, r := range c.creds {
			out[h] = r
		}
	}
	return out
}

// compileCredentials checks the routes: each host must be allowed on
// its upstream port, where the proxy takes the request.
func (c *CompiledAllowlist) compileCredentials(a Allowlist) error {
	for host, r := range a.Credentials {
		if err := checkCredential(host, r); err != nil {
			return fmt.Errorf("%w: allowlist: %v", spec.ErrInvalidSpec, err)
		}
		if _, ok := c.Match(host, r.UpstreamPort()); !ok {
			return fmt.Errorf("%w: allowlist: credentials %q: the host is not allowed on port %d", spec.ErrInvalidSpec, host, r.UpstreamPort())
		}
		if c.creds == nil {
			c.creds = map[string]CredentialRoute{}
		}
		c.creds[host] = r
	}
	return nil
}
