package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

// Tier is the containment strength a request needs (seed 000, section 2).
type Tier int

// Tiers.
const (
	// TierNone executes nothing (planning, review).
	TierNone Tier = 0
	// TierStructured runs only typed host-side operations, nothing arbitrary.
	TierStructured Tier = 1
	// TierSandboxed is confined execution of arbitrary commands.
	TierSandboxed Tier = 2
	// TierHostile is for hostile code: it needs a microVM backend, which
	// confine does not have, so it is always refused.
	TierHostile Tier = 3
)

// Profile fixes what a command may do: a built-in one (ResolveProfile by name) or one
// loaded from a TOML file (loadProfile, ResolveProfile).
//
// Precedence, lowest first: built-in defaults (the system read roots,
// defaultDevices, DefaultPassthrough(), spec.DefaultLimits(), deny-all
// network) < the profile < command-line flags and CommandSpec fields. A
// flag refines a profile: --ro/--rw add roots, --env adds or overrides
// variables (still sanitised, with the profile's env.waive), and a limit
// flag replaces the profile's value for that limit. Nothing given later
// can raise the tier, allow a network, or waive a guarantee or a variable
// the profile does not waive.
type Profile struct {
	Name string
	Tier Tier
	// ReadExec are roots added to the default system set.
	ReadExec []string
	// Devices are device nodes granted one by one.
	Devices []string
	// Waive names guarantees this profile explicitly gives up.
	Waive []string
	// Limits override spec.DefaultLimits() where set.
	Limits spec.Limits

	// Description is free text from the profile file.
	Description string `json:",omitempty"`
	// Writable are roots the command may write, besides the work
	// directory and its private temp dir.
	Writable []string `json:",omitempty"`
	// Env is the profile's environment policy.
	Env EnvPolicy
	// Network is the network policy; "" means spec.DenyAll.
	Network spec.NetworkPolicy `json:",omitempty"`
	// Allowlist is the egress allowlist when Network is spec.Allowlist
	// (nil there means deny all); nil otherwise.
	Allowlist *Allowlist `json:",omitempty"`
	// Caches are NAME=SUBDIR entries: build caches kept across runs. Each
	// run gets NAME set to a directory SUBDIR of its own cache (per user,
	// per profile and per work directory; never the caller's own cache)
	// and may write it (see internal/warmcache).
	Caches []string `json:",omitempty"`
	// RequireNamespaces refuses the run unless the landlock+namespaces
	// provider runs it (user, PID, mount, network, IPC and UTS
	// namespaces on top of the core): where user namespaces are blocked
	// (stock Docker, Kubernetes) the run is refused, never downgraded.
	RequireNamespaces bool `json:",omitempty"`
	// HostOps are the Tier 1 operations a tier 1 profile allows (see
	// HostOp); empty for other tiers.
	HostOps []string `json:",omitempty"`
	// Guard are the profile's changes to the persistence guard's
	// protected set ([guard]; internal/guardset, docs/guard.md); nil:
	// none.
	Guard *Guard `json:",omitempty"`
	// Source is the file the profile was loaded from; "" for a built-in.
	// It is not part of Digest.
	Source string `json:"-"`
}

// Guard is a profile's [guard] table: rows of the protected set moved
// between refused and reported, by name, and rows of its own.
type Guard struct {
	Refuse []string     `json:",omitempty"`
	Report []string     `json:",omitempty"`
	Add    []GuardEntry `json:",omitempty"`
}

// GuardEntry is a row a profile adds ([guard.add.NAME]).
type GuardEntry struct {
	Name    string
	Pattern string
	// Action is "refuse" or "report".
	Action string
	Why    string `json:",omitempty"`
}

// guardActions are GuardEntry.Action's values.
var guardActions = map[string]guardset.Action{"refuse": guardset.Refuse, "report": guardset.Report}

// GuardPolicy is the persistence guard's policy under p: the defaults,
// p's waiver of spec.GGitPersistence and p's [guard] changes, which a loaded
// profile has had validated (an error wraps guardset.ErrChange).
func (p Profile) GuardPolicy() (guardset.Policy, error) {
	waived := slices.Contains(p.Waive, spec.GGitPersistence)
	if p.Guard == nil {
		return guardset.New(waived, guardset.Changes{})
	}
	c := guardset.Changes{Refuse: p.Guard.Refuse, Report: p.Guard.Report}
	for _, a := range p.Guard.Add {
		act, ok := guardActions[a.Action]
		if !ok {
			act = guardset.Allow // New refuses it
		}
		c.Add = append(c.Add, guardset.Entry{Name: a.Name, Pattern: a.Pattern, Default: act, Why: a.Why})
	}
	return guardset.New(waived, c)
}

// Waives are the guarantees a run under p gives up: Waive, and
// spec.GGitPersistence where the profile's [guard] reports a git row (moved to
// guard.report): the guarantee no longer holds, and Tier 2 keeps .git as
// one (docs/guard.md), so the run's guarantees, result and ledger say it
// is waived, as if the profile had waived it.
func (p Profile) Waives() []string {
	w := slices.Clone(p.Waive)
	if slices.Contains(w, spec.GGitPersistence) || p.Guard == nil {
		return w
	}
	if g, err := p.GuardPolicy(); err != nil || g.GitReported() {
		// An invalid [guard] never gets this far (loadProfile); were
		// it to, the guarantee is not claimed.
		w = append(w, spec.GGitPersistence)
	}
	return w
}

// EnvPolicy is a profile's environment policy, applied on top of
// DefaultPassthrough() (see EnvSources for the order).
type EnvPolicy struct {
	// Passthrough are variable names, or "PREFIX*" patterns, copied from
	// the caller's environment when set there.
	Passthrough []string `json:",omitempty"`
	// Set are NAME=VALUE entries, sorted by name.
	Set []string `json:",omitempty"`
	// Waive are exact variable names the sanitiser would refuse and this
	// profile lets through (still checked as path lists where they are
	// one).
	Waive []string `json:",omitempty"`
}

// Digest identifies the profile's content: the hex SHA-256 of its canonical
// JSON form, without Source. A capability records the digest of the
// profile it was minted for, so a file edited (or another file with the
// same name) after minting does not match it.
func (p Profile) Digest() string {
	p.Source = ""
	b, err := json.Marshal(p)
	if err != nil {
		// Profile holds only strings, ints and slices of them.
		panic(fmt.Sprintf("policy: encoding profile: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// defaultDevices are the device nodes ordinary programs need.
var defaultDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

// DefaultDevices returns a copy of the list, so that no caller can change it for
// the others.
func DefaultDevices() []string { return slices.Clone(defaultDevices) }

var builtins = map[string]Profile{
	"default": {Name: "default", Tier: TierSandboxed, Devices: defaultDevices, Network: spec.DenyAll},
}

// Lookup returns a built-in profile by name: "default" or a recipe
// ("go", "rust", "node", "python", "c"; see recipes), which is discovered
// on first use in the process and fails, wrapping spec.ErrUnavailable,
// when its toolchain is missing.
func lookupProfile(name string) (Profile, error) {
	if p, ok, err := lookupRecipe(name); ok {
		return p, err
	}
	p, ok := builtins[name]
	if !ok {
		return Profile{}, fmt.Errorf("%w: unknown profile %q (known: %v)", spec.ErrInvalidSpec, name, Names())
	}
	return p, nil
}

// Names lists the built-in profiles, recipes included, without
// resolving any.
func Names() []string {
	n := make([]string, 0, len(builtins)+len(recipes))
	for k := range builtins {
		n = append(n, k)
	}
	n = append(n, recipeNames()...)
	sort.Strings(n)
	return n
}

// CheckTier refuses tiers confine cannot serve.
func CheckTier(t Tier) error {
	switch t {
	case TierSandboxed:
		return nil
	case TierHostile:
		return fmt.Errorf("%w: tier 3 (hostile code) needs a microVM backend (Firecracker), which this host does not provide; it is never downgraded to tier 2", spec.ErrUnavailable)
	case TierNone, TierStructured:
		return fmt.Errorf("%w: tier %d executes no arbitrary command", spec.ErrInvalidSpec, t)
	default:
		return fmt.Errorf("%w: unknown tier %d", spec.ErrInvalidSpec, t)
	}
}
