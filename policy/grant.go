package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/token"
	"github.com/confine-sandbox/confine/spec"
)

// EgressGrant is a signed approval for network egress beyond a profile's
// allowlist (seed 000: a new host or a package install needs approval):
// runs of one task may reach one host, or one registry group, on one
// port, until it expires. The egress proxy records its ID in every
// connection it allows.
type EgressGrant struct {
	ID string `json:"id"`
	// Request is the approval request it answers ("" when granted
	// without one).
	Request string `json:"request,omitempty"`
	// Task is the CommandSpec.TaskID of the runs that may use it; ""
	// scopes it to runs without a task id.
	Task string `json:"task"`
	// Host is a host name or IP literal as NormalizeHost returns it, or
	// "group:NAME" for a registry group. No wildcards.
	Host    string    `json:"host"`
	Port    int       `json:"port"`
	Expires time.Time `json:"expires"`
}

// maxGrantTTL bounds a grant's life: approvals are for the work at hand.
// It is maxTTL, the one bound on every signed credential.
const maxGrantTTL = maxTTL

// grantNow is the clock grants are checked against (tests move it).
var grantNow = time.Now

// check validates the grant's fields (not its ID or expiry).
func (g EgressGrant) check() error {
	if err := spec.CheckAuditID(g.Task); err != nil {
		return fmt.Errorf("task %q: %v", g.Task, err)
	}
	if err := spec.CheckAuditID(g.Request); err != nil {
		return fmt.Errorf("request %q: %v", g.Request, err)
	}
	if g.Port < 1 || g.Port > 65535 {
		return fmt.Errorf("port %d: want 1-65535", g.Port)
	}
	if name, ok := strings.CutPrefix(g.Host, "group:"); ok {
		if _, ok := registryGroups[name]; !ok {
			return fmt.Errorf("unknown registry group %q (known: %s)", name, strings.Join(registryGroupNames(), ", "))
		}
		return nil
	}
	h, err := NormalizeHost(g.Host)
	if err != nil {
		return err
	}
	if h != g.Host {
		return fmt.Errorf("host %q is not normalised (want %q)", g.Host, h)
	}
	return nil
}

// Matches says whether the grant covers host:port (host normalised) now.
func (g EgressGrant) Matches(host string, port int) bool {
	if port != g.Port || !grantNow().Before(g.Expires) {
		return false
	}
	if name, ok := strings.CutPrefix(g.Host, "group:"); ok {
		for _, h := range registryGroups[name] {
			if h == host {
				return true
			}
		}
		return false
	}
	return g.Host == host
}

// GrantEgress signs g (its ID and Expires are set here) for ttl, at most
// 30 days, and returns the token and the grant. Errors wrap
// spec.ErrInvalidSpec.
func (e *Engine) GrantEgress(g EgressGrant, ttl time.Duration) (string, EgressGrant, error) {
	if ttl <= 0 || ttl > maxGrantTTL {
		return "", g, fmt.Errorf("%w: grant ttl %v: want more than 0 and at most %v", spec.ErrInvalidSpec, ttl, maxGrantTTL)
	}
	if err := g.check(); err != nil {
		return "", g, fmt.Errorf("%w: egress grant: %v", spec.ErrInvalidSpec, err)
	}
	id, err := token.NewID()
	if err != nil {
		return "", g, fmt.Errorf("grant id: %w", err)
	}
	g.ID = "apv-" + id
	g.Expires = grantNow().Add(ttl).UTC().Round(0)
	payload, err := json.Marshal(g)
	if err != nil {
		return "", g, fmt.Errorf("grant: %w", err)
	}
	return e.key.Grant(payload), g, nil
}

// ParseEgressGrant verifies a grant token made by an engine with the same
// key. It refuses a malformed, altered or foreign-key token, a revoked
// grant (RevokeID) and an expired one. Errors wrap spec.ErrCapability.
func (e *Engine) ParseEgressGrant(tok string) (EgressGrant, error) {
	var g EgressGrant
	bad := func(format string, a ...any) (EgressGrant, error) {
		return EgressGrant{}, token.GrantError(format, a...)
	}
	payload, err := e.key.OpenGrant(tok)
	if err != nil {
		return EgressGrant{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&g); err != nil {
		return bad("fields: %v", err)
	}
	if err := g.check(); err != nil {
		return bad("%v", err)
	}
	if e.isRevoked(g.ID) {
		return bad("%s was revoked", g.ID)
	}
	if !grantNow().Before(g.Expires) {
		return bad("%s expired at %s", g.ID, g.Expires.Format(time.RFC3339))
	}
	return g, nil
}

// VerifyGrants checks grant tokens for a run of task under capability c
// (already authorized): each must be signed by c's engine, unexpired,
// unrevoked and scoped to task. Errors wrap spec.ErrCapability.
func VerifyGrants(c *Cap, tokens []string, task string) ([]EgressGrant, error) {
	if len(tokens) == 0 {
		return nil, nil
	}
	if c == nil || c.eng == nil {
		return nil, fmt.Errorf("%w: egress grants need a capability", spec.ErrCapability)
	}
	out := make([]EgressGrant, 0, len(tokens))
	for _, t := range tokens {
		g, err := c.eng.ParseEgressGrant(strings.TrimSpace(t))
		if err != nil {
			return nil, err
		}
		if g.Task != task {
			return nil, fmt.Errorf("%w: egress grant %s is for task %q, the run is task %q", spec.ErrCapability, g.ID, g.Task, task)
		}
		out = append(out, g)
	}
	return out, nil
}
