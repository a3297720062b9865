//go:build linux

package launch

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/spec"
)

// Every backend value a plan may carry has one launch, found by that
// value; another value has none.
func TestRegistryByName(t *testing.T) {
	for _, b := range []plan.Backend{plan.BackendCore, plan.BackendNamespaces, plan.BackendBwrap} {
		impl, ok := For(b)
		if !ok || impl.Name() != b {
			t.Errorf("For(%s) = %v, %v", b, impl, ok)
		}
	}
	if impl, ok := For("chroot"); ok {
		t.Errorf("For(chroot) = %v", impl)
	}
	if n := len(Backends()); n != 3 {
		t.Errorf("%d backends, want 3", n)
	}
}

// Run launches nothing for a plan it has no backend for, nor with a
// fallback that is not the core's plan.
func TestRunRefusesBackend(t *testing.T) {
	for _, tt := range []struct {
		name     string
		backend  plan.Backend
		fallback plan.Backend
		want     string
	}{
		{"unknown backend", "chroot", "", "unknown backend"},
		{"sections disagree", plan.BackendCore, "", "does not use"},
		{"fallback for namespaces", plan.BackendNamespaces, plan.BackendNamespaces, "fallback: a plan for landlock+namespaces, not the core"},
		{"broken fallback", plan.BackendNamespaces, "chroot", "fallback: plan for unknown backend"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := testPlan(t, "echo ran")
			p.Backend = tt.backend
			fb := Fallback{}
			if tt.fallback != "" {
				fb.Plan = testPlan(t, "echo fallback ran")
				fb.Plan.Backend = tt.fallback
			}
			out, err := Run(context.Background(), p, fb, IO{OutputLimit: 1 << 10})
			if !errors.Is(err, spec.ErrLaunch) || !strings.Contains(err.Error(), tt.want) || out != nil {
				t.Fatalf("Run = %v, %v; want %s: ...%s", out, err, spec.ErrLaunch, tt.want)
			}
		})
	}
}
