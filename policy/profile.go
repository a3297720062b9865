package policy

import (
	"fmt"
	"sort"

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

// Profile fixes what a command may do.
type Profile struct {
	Name string
	Tier Tier
	// ReadExec are roots added to the default system set.
	ReadExec []string
	// Devices are device nodes granted one by one.
	Devices []string
	// Waive names guarantees this profile explicitly gives up.
	Waive []string
	// Limits override spec.DefaultLimits where set.
	Limits spec.Limits
}

// DefaultDevices are the device nodes ordinary programs need.
var DefaultDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"}

var builtins = map[string]Profile{
	"default": {Name: "default", Tier: TierSandboxed, Devices: DefaultDevices},
}

// Lookup returns a built-in profile by name.
func Lookup(name string) (Profile, error) {
	p, ok := builtins[name]
	if !ok {
		return Profile{}, fmt.Errorf("%w: unknown profile %q (known: %v)", spec.ErrInvalidSpec, name, Names())
	}
	return p, nil
}

// Names lists the built-in profiles.
func Names() []string {
	n := make([]string, 0, len(builtins))
	for k := range builtins {
		n = append(n, k)
	}
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
