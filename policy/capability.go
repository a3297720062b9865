// Package policy decides what a command may do: profiles, tiers, the
// guarantees a host can enforce, the environment a command gets, and the
// capability (SandboxExecCap) without which nothing runs.
package policy

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/confine-sandbox/confine/internal/token"
	"github.com/confine-sandbox/confine/spec"
)

// Engine mints and checks capabilities. Its key never leaves the process.
// It knows the built-in profiles and those registered with Register, keeps
// the ids it revoked, and records approvals. It is safe for concurrent use.
type Engine struct {
	key       token.Key
	mu        sync.Mutex
	revoked   map[string]bool
	profiles  map[string]Profile
	approvals []approval
	// environ, when set, is the caller's environment the recipes are
	// discovered in (SetEnviron).
	environ []string
}

// SetEnviron makes the engine discover recipes' toolchains in environ
// (NAME=VALUE entries: the caller's environment) instead of this
// process's, for a server that mints and authorizes runs for other
// processes (confine serve). Call it before the engine is used.
func (e *Engine) SetEnviron(environ []string) {
	e.mu.Lock()
	e.environ = slices.Clone(environ)
	e.mu.Unlock()
}

// NewEngine returns an engine with a fresh random key.
func NewEngine() (*Engine, error) {
	k, err := token.RandomKey()
	if err != nil {
		return nil, fmt.Errorf("policy engine key: %w", err)
	}
	return &Engine{key: k, revoked: map[string]bool{}}, nil
}

// Register makes a profile loaded from a file (loadProfile) known to this
// engine under its name, so that Mint, ParseToken and Authorize accept it.
// It refuses a built-in's name, an invalid name, and a different profile
// under a name already registered (the same content again is fine).
func (e *Engine) Register(p Profile) error {
	if !validProfileName(p.Name) {
		return fmt.Errorf("%w: profile name %q is not usable", spec.ErrInvalidSpec, p.Name)
	}
	if isBuiltin(p.Name) {
		return fmt.Errorf("%w: profile %q: a built-in profile has that name", spec.ErrInvalidSpec, p.Name)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if old, ok := e.profiles[p.Name]; ok && old.Digest() != p.Digest() {
		return fmt.Errorf("%w: profile %q is already registered with other content", spec.ErrInvalidSpec, p.Name)
	}
	if e.profiles == nil {
		e.profiles = map[string]Profile{}
	}
	e.profiles[p.Name] = p
	return nil
}

// lookup returns a built-in or registered profile.
func (e *Engine) lookup(name string) (Profile, error) {
	e.mu.Lock()
	environ := e.environ
	e.mu.Unlock()
	lookup := lookupProfile
	if environ != nil {
		lookup = func(name string) (Profile, error) { return LookupIn(name, environ) }
	}
	if p, err := lookup(name); err == nil {
		return p, nil
	} else if isBuiltin(name) {
		// A recipe whose toolchain is missing: say so, and never fall
		// back to a registered profile of that name.
		return Profile{}, err
	}
	e.mu.Lock()
	p, ok := e.profiles[name]
	e.mu.Unlock()
	if !ok {
		names := Names()
		e.mu.Lock()
		for n := range e.profiles {
			names = append(names, n)
		}
		e.mu.Unlock()
		sort.Strings(names)
		return Profile{}, fmt.Errorf("%w: unknown profile %q (known: %v)", spec.ErrInvalidSpec, name, names)
	}
	return p, nil
}

// Cap is a SandboxExecCap: the right to run commands under one profile in
// one scope. Only an Engine can make one; its fields are unexported and
// sealed with the engine's key, so a zero or copied-and-edited value is
// refused.
type Cap struct {
	id      string
	profile string
	digest  string
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

// ProfileDigest is the Digest of the profile the capability was minted for.
func (c *Cap) ProfileDigest() string { return c.digest }

// Expires is when the capability stops being accepted; zero means never.
func (c *Cap) Expires() time.Time { return c.expires }

// maxTTL is the longest life of anything the capability key signs: a
// capability token (Mint, confine cap mint --ttl) and an egress grant
// (confine approve --ttl). 30 days: a leaked token stops working within
// a month whatever its holder asked for.
const maxTTL = 30 * 24 * time.Hour

// maxScope bounds a capability's scope, so that every capability Mint
// issues serialises to a token ParseToken accepts (token.MaxLen).
const maxScope = 1024

// Mint issues a capability for a built-in or registered profile, bound to
// the profile's current Digest. ttl <= 0 means no expiry (an in-process
// capability, which Token refuses to serialise); a ttl over maxTTL and a
// scope over maxScope bytes are refused (spec.ErrInvalidSpec).
func (e *Engine) Mint(profile, scope string, ttl time.Duration) (*Cap, error) {
	if ttl > maxTTL {
		return nil, fmt.Errorf("%w: capability ttl %v is over the maximum of %v", spec.ErrInvalidSpec, ttl, maxTTL)
	}
	if len(scope) > maxScope {
		return nil, fmt.Errorf("%w: capability scope is %d bytes, over the maximum of %d", spec.ErrInvalidSpec, len(scope), maxScope)
	}
	p, err := e.lookup(profile)
	if err != nil {
		return nil, err
	}
	id, err := token.NewID()
	if err != nil {
		return nil, fmt.Errorf("capability id: %w", err)
	}
	c := &Cap{id: id, profile: profile, digest: p.Digest(), scope: scope, eng: e}
	if ttl > 0 {
		// Token carries nanoseconds; drop the monotonic reading so that a
		// parsed token's expiry equals the original's.
		c.expires = time.Now().Add(ttl).Round(0)
	}
	c.mac = e.seal(c)
	return c, nil
}

// Revoke makes c unusable from now on.
func (e *Engine) Revoke(c *Cap) {
	if c == nil {
		return
	}
	e.RevokeID(c.id)
}

// RevokeID makes every capability with this id unusable in this engine from
// now on, including ones parsed from tokens later.
func (e *Engine) RevokeID(id string) {
	e.mu.Lock()
	if e.revoked == nil {
		e.revoked = map[string]bool{}
	}
	e.revoked[id] = true
	e.mu.Unlock()
}

func (e *Engine) isRevoked(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.revoked[id]
}

// capSealDomain labels the in-process MAC of a capability. Its input is
// the same unambiguous encoding tokens sign, under another domain label.
const capSealDomain = "confine capability seal v1"

// seal is the in-process MAC of a capability.
func (e *Engine) seal(c *Cap) []byte {
	return e.key.MAC(capSealDomain, capFields(c))
}

// sealed reports whether c carries e's seal.
func (e *Engine) sealed(c *Cap) bool {
	return e.key.Verify(c.mac, capSealDomain, capFields(c))
}

// capFields is the encoding of c's fields that its seal and its token
// sign.
func capFields(c *Cap) []byte {
	return token.Fields{ID: c.id, Profile: c.profile, Digest: c.digest, Scope: c.scope, Expires: c.expires}.Encode()
}

// Authorize checks c for a run under profile and returns that profile.
// It refuses a nil, forged, revoked, expired or mismatched capability.
func Authorize(c *Cap, profile string) (Profile, error) {
	switch {
	case c == nil:
		return Profile{}, fmt.Errorf("%w: no capability", spec.ErrCapability)
	case c.eng == nil || !c.eng.sealed(c):
		return Profile{}, fmt.Errorf("%w: capability was not issued by a policy engine", spec.ErrCapability)
	case !c.expires.IsZero() && time.Now().After(c.expires):
		return Profile{}, fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	}
	if c.eng.isRevoked(c.id) {
		return Profile{}, fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	if profile == "" {
		profile = c.profile
	}
	if profile != c.profile {
		return Profile{}, fmt.Errorf("%w: capability is for profile %q, spec asks for %q", spec.ErrCapability, c.profile, profile)
	}
	p, err := c.eng.lookup(profile)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: capability is for profile %q, which this engine does not know: %v", spec.ErrCapability, profile, err)
	}
	if d := p.Digest(); d != c.digest {
		return Profile{}, fmt.Errorf("%w: capability is for another version of profile %q (digest %.12s, this one is %.12s): the profile changed since it was minted", spec.ErrCapability, profile, c.digest, d)
	}
	return p, nil
}
