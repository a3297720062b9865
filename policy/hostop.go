package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// HostOp is one Tier 1 operation: structured work on the host that
// executes nothing arbitrary (package hostop).
type HostOp string

// The Tier 1 operations. A Tier 1 profile lists those it allows
// (Profile.HostOps, host_ops in a profile file).
const (
	OpReadFile   HostOp = "read_file"
	OpWriteFile  HostOp = "write_file"
	OpApplyPatch HostOp = "apply_patch"
	OpSearch     HostOp = "search"
	OpList       HostOp = "list"
	// OpGitRead is git status, diff, log and show.
	OpGitRead HostOp = "git_read"
	// OpGitWrite is git add and commit.
	OpGitWrite HostOp = "git_write"
)

// hostOps is every operation, in a stable order.
var hostOps = []HostOp{OpReadFile, OpWriteFile, OpApplyPatch, OpSearch, OpList, OpGitRead, OpGitWrite}

// knownHostOp reports whether op names a Tier 1 operation.
func knownHostOp(op string) bool { return slices.Contains(hostOps, HostOp(op)) }

func hostOpNames() string {
	s := make([]string, len(hostOps))
	for i, o := range hostOps {
		s[i] = string(o)
	}
	return strings.Join(s, ", ")
}

func init() {
	all := make([]string, len(hostOps))
	for i, o := range hostOps {
		all[i] = string(o)
	}
	builtins["host"] = Profile{Name: "host", Tier: TierStructured, HostOps: all}
	builtins["host-readonly"] = Profile{Name: "host-readonly", Tier: TierStructured,
		HostOps: []string{string(OpReadFile), string(OpSearch), string(OpList), string(OpGitRead)}}
}

// HostOpCap is the Tier 1 capability: the right to perform the operations
// a Tier 1 profile lists, in one scope. Like Cap (SandboxExecCap) only an
// Engine makes one and it is sealed with the engine's key, under another
// label, so a Cap cannot pass for a HostOpCap nor the reverse. A profile
// of another tier gets none: Tier 0 executes and touches nothing, and a
// Tier 2 capability is for confined execution (RunCommand).
type HostOpCap struct {
	c   Cap
	mac []byte
}

// ID identifies the capability in logs.
func (h *HostOpCap) ID() string { return h.c.id }

// Profile is the Tier 1 profile the capability is bound to.
func (h *HostOpCap) Profile() string { return h.c.profile }

// Scope is the scope the capability was issued for.
func (h *HostOpCap) Scope() string { return h.c.scope }

// Guard is the persistence guard's policy under the capability's profile
// (Profile.GuardPolicy: its waiver of spec.GGitPersistence and its [guard]);
// an error where the profile cannot be looked up (operations are refused
// then).
func (h *HostOpCap) Guard() (guardset.Policy, error) {
	if h == nil || h.c.eng == nil {
		return guardset.Policy{}, fmt.Errorf("%w: no capability", spec.ErrCapability)
	}
	p, err := h.c.eng.lookup(h.c.profile)
	if err != nil {
		return guardset.Policy{}, err
	}
	return p.GuardPolicy()
}

// hostSealDomain labels a HostOpCap's seal, so that a Cap cannot pass for
// one.
const hostSealDomain = "confine host operation capability seal v1"

func (e *Engine) sealHost(h *HostOpCap) []byte {
	return e.key.MAC(hostSealDomain, capFields(&h.c))
}

// MintHostOp issues a Tier 1 capability for a built-in or registered
// profile whose tier is 1. ttl <= 0 means no expiry.
func (e *Engine) MintHostOp(profile, scope string, ttl time.Duration) (*HostOpCap, error) {
	p, err := e.lookup(profile)
	if err != nil {
		return nil, err
	}
	if err := tierOneOnly(p); err != nil {
		return nil, err
	}
	c, err := e.Mint(profile, scope, ttl)
	if err != nil {
		return nil, err
	}
	return e.hostFromCap(c), nil
}

func (e *Engine) hostFromCap(c *Cap) *HostOpCap {
	h := &HostOpCap{c: *c}
	h.c.mac = nil
	h.mac = e.sealHost(h)
	return h
}

// HostOpFromToken verifies a token (Token, confine cap mint) for a Tier 1
// profile and returns it as a HostOpCap. A token for a profile of another
// tier is refused.
func (e *Engine) HostOpFromToken(tok string) (*HostOpCap, error) {
	c, err := e.ParseToken(tok)
	if err != nil {
		return nil, err
	}
	p, err := e.lookup(c.profile)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrCapability, err)
	}
	if err := tierOneOnly(p); err != nil {
		return nil, err
	}
	return e.hostFromCap(c), nil
}

func tierOneOnly(p Profile) error {
	switch p.Tier {
	case TierStructured:
		return nil
	case TierNone:
		return fmt.Errorf("%w: profile %q is tier 0: it performs no operation at all", spec.ErrCapability, p.Name)
	}
	return fmt.Errorf("%w: profile %q is tier %d; host operations need a tier 1 profile (tier 2 and 3 are for confined execution)", spec.ErrCapability, p.Name, p.Tier)
}

// AuthorizeHostOp checks h for op and returns its profile. It refuses a
// nil, forged, revoked or expired capability, one whose profile changed
// since it was minted, a profile not of tier 1, and an operation the
// profile does not list. Errors wrap spec.ErrCapability.
func AuthorizeHostOp(h *HostOpCap, op HostOp) (Profile, error) {
	switch {
	case h == nil:
		return Profile{}, fmt.Errorf("%w: no capability", spec.ErrCapability)
	case h.c.eng == nil || !h.c.eng.key.Verify(h.mac, hostSealDomain, capFields(&h.c)):
		return Profile{}, fmt.Errorf("%w: host capability was not issued by a policy engine", spec.ErrCapability)
	case !h.c.expires.IsZero() && time.Now().After(h.c.expires):
		return Profile{}, fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, h.c.id, h.c.expires.Format(time.RFC3339))
	case h.c.eng.isRevoked(h.c.id):
		return Profile{}, fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, h.c.id)
	case !knownHostOp(string(op)):
		return Profile{}, fmt.Errorf("%w: unknown host operation %q (known: %s)", spec.ErrCapability, op, hostOpNames())
	}
	p, err := h.c.eng.lookup(h.c.profile)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %v", spec.ErrCapability, err)
	}
	if p.Digest() != h.c.digest {
		return Profile{}, fmt.Errorf("%w: profile %q changed since the capability was minted", spec.ErrCapability, p.Name)
	}
	if err := tierOneOnly(p); err != nil {
		return Profile{}, err
	}
	if !slices.Contains(p.HostOps, string(op)) {
		return Profile{}, fmt.Errorf("%w: profile %q does not allow %s (it allows: %s)", spec.ErrCapability, p.Name, op, strings.Join(p.HostOps, ", "))
	}
	return p, nil
}
