package policy

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/confine-sandbox/confine/internal/token"
	"github.com/confine-sandbox/confine/spec"
)

// tokenSkew is the clock difference between minting and checking hosts
// that ParseToken tolerates on top of maxTTL.
const tokenSkew = 5 * time.Minute

// NewEngineWithKey returns an engine whose key is key (at least 32 bytes,
// internal/token.MinKeySize; copied), so that engines in several processes
// sharing the key accept each other's tokens. The CLI reads the key from
// a file with internal/token.LoadKey. Errors wrap spec.ErrCapability.
func NewEngineWithKey(key []byte) (*Engine, error) {
	k, err := token.NewKey(key)
	if err != nil {
		return nil, err
	}
	return &Engine{key: k, revoked: map[string]bool{}}, nil
}

// Token serialises c for a caller in another process (confine run --cap):
// "cfn1." + base64url(fields) + "." + base64url(HMAC-SHA256), where the
// fields are the capability's id, profile name, profile digest, scope and
// expiry, and the MAC is keyed with the engine's key under a label naming
// the format version. Only a capability this engine minted or parsed, that
// is still valid, and that expires can be serialised: a token outlives the
// engine's revocation list, so it must run out by itself.
func (e *Engine) Token(c *Cap) (string, error) {
	switch {
	case c == nil:
		return "", fmt.Errorf("%w: no capability", spec.ErrCapability)
	case c.eng != e || !e.sealed(c):
		return "", fmt.Errorf("%w: capability was not issued by this engine", spec.ErrCapability)
	case c.expires.IsZero():
		return "", fmt.Errorf("%w: capability %s never expires; mint it with a ttl to serialise it", spec.ErrCapability, c.id)
	case !time.Unix(0, c.expires.UnixNano()).Equal(c.expires):
		return "", fmt.Errorf("%w: capability %s expires too late to encode", spec.ErrCapability, c.id)
	case time.Now().After(c.expires):
		return "", fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	case e.isRevoked(c.id):
		return "", fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	tok := e.key.Capability(capFields(c))
	if len(tok) > token.MaxLen {
		// ParseToken would refuse it; say so here rather than hand out a
		// token that cannot be used.
		return "", fmt.Errorf("%w: capability %s serialises to %d bytes, over the maximum of %d", spec.ErrCapability, c.id, len(tok), token.MaxLen)
	}
	return tok, nil
}

// ParseToken verifies a token made by Token with this engine's key and
// returns the capability it carries, bound to this engine (Authorize then
// checks its profile against this engine's). Every refusal wraps
// spec.ErrCapability and says why: malformed (not a confine token, another
// version, bad encoding), signature mismatch (tampered, or signed with
// another key: the two cannot be told apart), expired, or revoked in this
// engine (RevokeID).
func (e *Engine) ParseToken(tok string) (*Cap, error) {
	payload, err := e.key.OpenCapability(tok)
	if err != nil {
		return nil, err
	}
	f, err := token.DecodeFields(payload)
	if err != nil {
		return nil, token.Malformed(err.Error())
	}
	c := &Cap{id: f.ID, profile: f.Profile, digest: f.Digest, scope: f.Scope, expires: f.Expires}
	switch {
	case c.expires.IsZero():
		return nil, token.Malformed("no expiry")
	case time.Now().After(c.expires):
		return nil, fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	case c.expires.After(time.Now().Add(maxTTL + tokenSkew)):
		// Signed by a confine without the bound, or by a key holder
		// that skipped Mint: still refused.
		return nil, fmt.Errorf("%w: capability %s expires at %s, more than the maximum of %v from now", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339), maxTTL)
	case e.isRevoked(c.id):
		return nil, fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	c.eng = e
	c.mac = e.seal(c)
	return c, nil
}

// approvalKind is what an approval allows.
type approvalKind string

// approval kinds (seed 000: network, package installs and new hosts need
// approval).
const (
	// approvalNewHost lets runs reach a host (Subject: the host name).
	approvalNewHost approvalKind = "new-host"
	// approvalPackageInstall lets runs install a package (Subject: the
	// package, e.g. "npm:left-pad@1.3.0").
	approvalPackageInstall approvalKind = "package-install"
)

// approval is a recorded grant. Nothing in this version acts on it: the
// egress proxy, when it exists, consumes approvals by ID.
type approval struct {
	ID      string       `json:"id"`
	Kind    approvalKind `json:"kind"`
	Subject string       `json:"subject"`
	Granted time.Time    `json:"granted"`
}

// approve records an approval and returns it with a fresh ID. It refuses
// an unknown kind and a subject that is empty, longer than 1024 bytes, or
// holds control characters. Errors wrap spec.ErrInvalidSpec.
func (e *Engine) approve(kind approvalKind, subject string) (approval, error) {
	switch kind {
	case approvalNewHost, approvalPackageInstall:
	default:
		return approval{}, fmt.Errorf("%w: unknown approval kind %q (want %q or %q)", spec.ErrInvalidSpec, kind, approvalNewHost, approvalPackageInstall)
	}
	if subject == "" || len(subject) > 1024 || strings.IndexFunc(subject, unicode.IsControl) >= 0 {
		return approval{}, fmt.Errorf("%w: approval subject %q: want 1-1024 bytes without control characters", spec.ErrInvalidSpec, subject)
	}
	id, err := token.NewID()
	if err != nil {
		return approval{}, fmt.Errorf("approval id: %w", err)
	}
	a := approval{ID: id, Kind: kind, Subject: subject, Granted: time.Now().Round(0)}
	e.mu.Lock()
	e.approvals = append(e.approvals, a)
	e.mu.Unlock()
	return a, nil
}

// grantedApprovals returns the recorded approvals in the order they were granted.
func (e *Engine) grantedApprovals() []approval {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]approval(nil), e.approvals...)
}
