package egress

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Run is one run's egress proxy (network = "allowlist") from its start to
// its records: it listens on the launcher's loopback, and the supervisor
// connects the command's internet sockets to it and nowhere else.
type Run struct {
	proxy  *Proxy
	addr   netip.AddrPort
	cancel context.CancelFunc
	done   chan error

	mu sync.Mutex
	// pids maps the local address (address and port) of each
	// connection the supervisor made for the command to the thread that
	// asked. The whole address, not the port alone: a host process may
	// take the same port on another loopback address (127.0.0.2:P), but
	// not 127.0.0.1:P while the supervisor's socket is bound to it, so
	// a connection from that address is the supervisor's.
	pids map[netip.AddrPort]int
}

// proxyVars name the proxy in the environment: the variables curl, git,
// Go, Python (pip, requests), npm, cargo and most HTTP clients read.
var proxyVars = []string{
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
	"npm_config_proxy", "npm_config_https_proxy",
}

// noProxyVars are emptied: an exemption would only fail (the supervisor
// refuses a direct connect), so none is inherited.
var noProxyVars = []string{"NO_PROXY", "no_proxy"}

// Start starts the proxy for a run of s with allowlist allow and the
// approved grants; runID goes into its records, and callerEnv looks up
// the caller's environment, where credential routes find their secrets.
func Start(allow *policy.CompiledAllowlist, grants []policy.EgressGrant, runID string, s *spec.CommandSpec, callerEnv func(string) (string, bool)) (*Run, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("%w: egress proxy: %v", spec.ErrLaunch, err)
	}
	creds, err := credentials(allow, s.Env, callerEnv)
	if err != nil {
		ln.Close()
		return nil, err
	}
	e := &Run{pids: map[netip.AddrPort]int{}, done: make(chan error, 1)}
	e.addr = netip.MustParseAddrPort(ln.Addr().String())
	e.proxy, err = New(Config{Allow: allow, Grants: grants, Credentials: creds, RunID: runID, TaskID: s.TaskID, JobID: s.JobID,
		PIDOf: e.pidOf, KnownClientsOnly: true})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("%w: egress proxy: %v", spec.ErrLaunch, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() { e.done <- e.proxy.Serve(ctx, ln) }()
	return e, nil
}

// credentials resolves the profile's credential routes from the caller's
// environment (the launcher's, never the command's): a route whose
// variable is unset, or that the command's environment would also hold,
// refuses the run.
func credentials(allow *policy.CompiledAllowlist, cmdEnv []string, callerEnv func(string) (string, bool)) (map[string]Credential, error) {
	routes := allow.CredentialRoutes()
	if len(routes) == 0 {
		return nil, nil
	}
	out := make(map[string]Credential, len(routes))
	for host, r := range routes {
		for _, kv := range cmdEnv {
			if name, _, _ := strings.Cut(kv, "="); name == r.Env {
				return nil, fmt.Errorf("%w: credential route %s: $%s would also enter the command's environment; the proxy adds it, the command must not have it", spec.ErrInvalidSpec, host, r.Env)
			}
		}
		v, ok := callerEnv(r.Env)
		if !ok || v == "" {
			return nil, fmt.Errorf("%w: credential route %s: $%s is not set in the caller's environment", spec.ErrUnavailable, host, r.Env)
		}
		c := Credential{Header: r.Header, Value: r.Prefix + v, Port: r.UpstreamPort(), Env: r.Env}
		if r.CAFile != "" {
			pem, err := os.ReadFile(r.CAFile)
			if err != nil {
				return nil, fmt.Errorf("%w: credential route %s: ca_file: %v", spec.ErrInvalidSpec, host, err)
			}
			pool, err := x509.SystemCertPool()
			if err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("%w: credential route %s: ca_file %s holds no PEM certificate", spec.ErrInvalidSpec, host, r.CAFile)
			}
			c.Roots = pool
		}
		out[host] = c
	}
	return out, nil
}

func (e *Run) pidOf(client net.Addr) int {
	ta, ok := client.(*net.TCPAddr)
	if !ok {
		return 0
	}
	ap := ta.AddrPort()
	ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	e.mu.Lock()
	defer e.mu.Unlock()
	// One lookup per registration: the address may later serve another
	// connection, which registers again.
	pid := e.pids[ap]
	delete(e.pids, ap)
	return pid
}

// Addr is the proxy's address on the launcher's loopback.
func (e *Run) Addr() netip.AddrPort { return e.addr }

// Register is the supervisor's side: it learns the local address of a
// connection the supervisor makes to the proxy for task tid, before it
// connects.
func (e *Run) Register(local netip.AddrPort, tid int) {
	e.mu.Lock()
	e.pids[netip.AddrPortFrom(local.Addr().Unmap(), local.Port())] = tid
	e.mu.Unlock()
}

// Refused records a destination task tid tried to reach directly.
func (e *Run) Refused(dst netip.AddrPort, tid int) { e.proxy.RecordDirect(dst, tid) }

// Env returns env with the proxy variables pointing at the proxy.
func (e *Run) Env(env []string) []string {
	url := "http://" + e.addr.String()
	drop := map[string]bool{}
	for _, n := range append(append([]string(nil), proxyVars...), noProxyVars...) {
		drop[n] = true
	}
	out := make([]string, 0, len(env)+len(proxyVars)+len(noProxyVars))
	for _, kv := range env {
		if name, _, _ := strings.Cut(kv, "="); !drop[name] {
			out = append(out, kv)
		}
	}
	for _, n := range proxyVars {
		out = append(out, n+"="+url)
	}
	for _, n := range noProxyVars {
		out = append(out, n+"=")
	}
	return out
}

// Stop ends the proxy (open connections included: the command is gone)
// and returns its records.
func (e *Run) Stop() []spec.Connection {
	e.cancel()
	<-e.done
	c, _ := e.proxy.Connections()
	return c
}
