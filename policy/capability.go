// Package policy decides what a command may do: profiles, tiers, the
// guarantees a host can enforce, the environment a command gets, and the
// capability (SandboxExecCap) without which nothing runs.
package policy

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// Engine mints and checks capabilities. Its key never leaves the process.
type Engine struct {
	key     []byte
	mu      sync.Mutex
	revoked map[string]bool
}

// NewEngine returns an engine with a fresh random key.
func NewEngine() (*Engine, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, fmt.Errorf("policy engine key: %w", err)
	}
	return &Engine{key: k, revoked: map[string]bool{}}, nil
}

// Cap is a SandboxExecCap: the right to run commands under one profile in
// one scope. Only an Engine can make one; its fields are unexported and
// sealed with the engine's key, so a zero or copied-and-edited value is
// refused.
type Cap struct {
	id      string
	profile string
	scope   string
	expires time.Time
	mac     []byte
	eng     *Engine
}

// ID identifies the capability in logs.
func (c *Cap) ID() string { return c.id }

// Profile is the profile the capability is bound to.
func (c *Cap) Profile() string { return c.profile }

// Scope is the scope the capability was issued for.
func (c *Cap) Scope() string { return c.scope }

// Mint issues a capability for a known profile. ttl <= 0 means no expiry.
func (e *Engine) Mint(profile, scope string, ttl time.Duration) (*Cap, error) {
	if _, err := Lookup(profile); err != nil {
		return nil, err
	}
	idb := make([]byte, 12)
	if _, err := rand.Read(idb); err != nil {
		return nil, fmt.Errorf("capability id: %w", err)
	}
	c := &Cap{id: hex.EncodeToString(idb), profile: profile, scope: scope, eng: e}
	if ttl > 0 {
		c.expires = time.Now().Add(ttl)
	}
	c.mac = e.seal(c)
	return c, nil
}

// Revoke makes c unusable from now on.
func (e *Engine) Revoke(c *Cap) {
	if c == nil {
		return
	}
	e.mu.Lock()
	e.revoked[c.id] = true
	e.mu.Unlock()
}

func (e *Engine) seal(c *Cap) []byte {
	m := hmac.New(sha256.New, e.key)
	fmt.Fprintf(m, "%s\x00%s\x00%s\x00%d", c.id, c.profile, c.scope, c.expires.UnixNano())
	return m.Sum(nil)
}

// Authorize checks c for a run under profile and returns that profile.
// It refuses a nil, forged, revoked, expired or mismatched capability.
func Authorize(c *Cap, profile string) (Profile, error) {
	switch {
	case c == nil:
		return Profile{}, fmt.Errorf("%w: no capability", spec.ErrCapability)
	case c.eng == nil || !hmac.Equal(c.mac, c.eng.seal(c)):
		return Profile{}, fmt.Errorf("%w: capability was not issued by a policy engine", spec.ErrCapability)
	case !c.expires.IsZero() && time.Now().After(c.expires):
		return Profile{}, fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	}
	c.eng.mu.Lock()
	revoked := c.eng.revoked[c.id]
	c.eng.mu.Unlock()
	if revoked {
		return Profile{}, fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	if profile == "" {
		profile = c.profile
	}
	if profile != c.profile {
		return Profile{}, fmt.Errorf("%w: capability is for profile %q, spec asks for %q", spec.ErrCapability, c.profile, profile)
	}
	return Lookup(profile)
}
