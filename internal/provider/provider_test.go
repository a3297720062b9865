//go:build linux

package provider

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

var (
	withNS   = host.Info{LandlockABI: 7, Seccomp: true, UserNS: true}
	inDocker = host.Info{LandlockABI: 7, Seccomp: true, UserNSErr: "clone(CLONE_NEWUSER): operation not permitted"}
	bare     = host.Info{LandlockErr: "landlock unavailable", SeccompErr: "no seccomp"}
	// withBwrap: bwrap installed; probed and working, or probed and
	// refused (an AppArmor policy, say).
	withBwrap    = host.Info{LandlockABI: 7, Seccomp: true, UserNS: true, Bwrap: "/usr/bin/bwrap", BwrapChecked: true}
	brokenBwrap  = host.Info{LandlockABI: 7, Seccomp: true, UserNS: true, Bwrap: "/usr/bin/bwrap", BwrapChecked: true, BwrapErr: "bwrap: setting up uid map: Permission denied"}
	bwrapUnknown = host.Info{LandlockABI: 7, Seccomp: true, UserNSErr: "clone(CLONE_NEWUSER): operation not permitted", Bwrap: "/nonexistent/bwrap"}
)

func names(sk []spec.SkippedBackend) string {
	var n []string
	for _, s := range sk {
		n = append(n, s.Name+"="+s.Reason)
	}
	return strings.Join(n, "; ")
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name    string
		h       host.Info
		req     Request
		want    string // provider, or "" for a refusal
		errIs   error
		errHas  string
		skipped string // substring of the skipped list
	}{
		{name: "namespaces first", h: withNS, req: Request{Tier: policy.TierSandboxed}, want: Namespaces,
			skipped: "landlock+seccomp=landlock+namespaces comes first; bubblewrap=bwrap is not installed"},
		{name: "bwrap never automatic", h: withBwrap, req: Request{Tier: policy.TierSandboxed}, want: Namespaces,
			skipped: "bubblewrap=landlock+namespaces comes first"},
		{name: "require_namespaces picks namespaces, not bwrap", h: withBwrap, req: Request{Tier: policy.TierSandboxed, RequireNamespaces: true}, want: Namespaces},
		{name: "explicit bwrap", h: withBwrap, req: Request{Tier: policy.TierSandboxed, Backend: "bwrap"}, want: Bubblewrap,
			skipped: "landlock+namespaces=not requested (--backend bubblewrap)"},
		{name: "explicit bwrap, namespaces required", h: withBwrap, req: Request{Tier: policy.TierSandboxed, Backend: "bubblewrap", RequireNamespaces: true}, want: Bubblewrap},
		{name: "explicit bwrap, probe failed", h: brokenBwrap, req: Request{Tier: policy.TierSandboxed, Backend: "bwrap"},
			errIs: spec.ErrUnavailable, errHas: "backend bubblewrap cannot run commands here: bwrap cannot create its namespaces here: bwrap: setting up uid map"},
		{name: "explicit bwrap, no user namespaces", h: bwrapUnknown, req: Request{Tier: policy.TierSandboxed, Backend: "bwrap"},
			errIs: spec.ErrUnavailable, errHas: "user namespaces unavailable (bwrap is not setuid)"},
		{name: "container: the core", h: inDocker, req: Request{Tier: policy.TierSandboxed}, want: Core,
			skipped: "landlock+namespaces=user namespaces unavailable: clone(CLONE_NEWUSER): operation not permitted"},
		{name: "required and available", h: withNS, req: Request{Tier: policy.TierSandboxed, RequireNamespaces: true}, want: Namespaces},
		{name: "required in a container", h: inDocker, req: Request{Tier: policy.TierSandboxed, RequireNamespaces: true},
			errIs: spec.ErrUnavailable, errHas: "requires namespaces", skipped: "landlock+seccomp=the profile requires namespaces"},
		{name: "explicit core", h: withNS, req: Request{Tier: policy.TierSandboxed, Backend: "core"}, want: Core,
			skipped: "landlock+namespaces=not requested (--backend landlock+seccomp)"},
		{name: "explicit core, namespaces required", h: withNS, req: Request{Tier: policy.TierSandboxed, Backend: "core", RequireNamespaces: true},
			errIs: spec.ErrUnavailable, errHas: "landlock+seccomp cannot run commands here: the profile requires namespaces"},
		{name: "explicit namespaces in a container", h: inDocker, req: Request{Tier: policy.TierSandboxed, Backend: "namespaces"},
			errIs: spec.ErrUnavailable, errHas: "user namespaces unavailable"},
		{name: "bwrap", h: withNS, req: Request{Tier: policy.TierSandboxed, Backend: "bwrap"},
			errIs: spec.ErrUnavailable, errHas: "backend bubblewrap cannot run commands here: bwrap is not installed"},
		{name: "container CLI", h: withNS, req: Request{Tier: policy.TierSandboxed, Backend: "docker"},
			errIs: spec.ErrUnavailable, errHas: "container"},
		{name: "unknown", h: withNS, req: Request{Tier: policy.TierSandboxed, Backend: "chroot"},
			errIs: spec.ErrInvalidSpec, errHas: "unknown backend"},
		{name: "tier 3", h: withNS, req: Request{Tier: policy.TierHostile},
			errIs: spec.ErrUnavailable, errHas: "microVM", skipped: "landlock+namespaces=serves tier 2 at most"},
		{name: "no landlock", h: bare, req: Request{Tier: policy.TierSandboxed},
			errIs: spec.ErrUnavailable, errHas: "no backend", skipped: "landlock+seccomp=no Landlock"},
		{name: "auto", h: inDocker, req: Request{Tier: policy.TierSandboxed, Backend: "auto"}, want: Core},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := Select(tt.h, tt.req)
			got := ""
			if sel.Provider != nil {
				got = sel.Provider.Name()
			}
			switch {
			case tt.want != "" && (err != nil || got != tt.want):
				t.Fatalf("got %q, %v; want %q", got, err, tt.want)
			case tt.want == "" && (err == nil || !errors.Is(err, tt.errIs) || !strings.Contains(err.Error(), tt.errHas)):
				t.Fatalf("got %q, %v; want an error wrapping %v containing %q", got, err, tt.errIs, tt.errHas)
			}
			if !strings.Contains(names(sel.Skipped), tt.skipped) {
				t.Fatalf("skipped %q lacks %q", names(sel.Skipped), tt.skipped)
			}
			if got != "" && len(sel.Skipped) != len(Registry())-1 {
				t.Fatalf("skipped %d of %d providers: %s", len(sel.Skipped), len(Registry()), names(sel.Skipped))
			}
		})
	}
}

// Each backend's section: its value, and a namespaces section that
// agrees with it, sized from the plan it reads (which it leaves alone).
func TestSection(t *testing.T) {
	base := plan.Plan{UID: -1, GID: -1, Rlimits: plan.Rlimits{FSize: 64 << 20}}
	for _, name := range []string{"namespaces", "bwrap", "core"} {
		pr, _ := Lookup(name)
		p := base
		p.Backend, p.Namespaces = pr.Section(base)
		if string(p.Backend) != pr.Name() || p.CheckBackend() != nil {
			t.Fatalf("%s: backend %q, namespaces %+v (%v)", name, p.Backend, p.Namespaces, p.CheckBackend())
		}
		if name != "core" && (p.Namespaces.TmpfsBytes != 64<<20 || len(p.Namespaces.Private) == 0) {
			t.Errorf("%s: namespaces %+v, want a private tmpfs of 64 MiB", name, p.Namespaces)
		}
		if name == "namespaces" && len(p.Namespaces.UIDs) == 0 {
			t.Errorf("namespaces: no uid map in %+v", p.Namespaces)
		}
	}
}

// Each backend decides its guarantees from the ledger layers it names, and
// selection skips a backend that cannot enforce what the run needs.
func TestLedgerLayersAndEnforce(t *testing.T) {
	for _, tt := range []struct {
		name string
		want []ledger.Layer
	}{
		{"core", []ledger.Layer{ledger.Core}},
		{"namespaces", []ledger.Layer{ledger.Core, ledger.Namespaces}},
		{"bwrap", []ledger.Layer{ledger.Core, ledger.Bwrap}},
	} {
		p, _ := Lookup(tt.name)
		if got := p.Ledger(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: ledger layers %v, want %v", tt.name, got, tt.want)
		}
	}
	h := host.Info{LandlockABI: 2, Seccomp: true, UserNS: true}
	enforce := func(p Provider) error {
		_, err := ledger.Resolve(ledger.Decide(p.Ledger(), Facts(h, p, false, 100)), []string{spec.GFSWrite})
		return err
	}
	sel, err := Select(h, Request{Tier: policy.TierSandboxed, Enforce: enforce})
	if err != nil || sel.Provider.Name() != Namespaces {
		t.Fatalf("abi 2 with user namespaces: %v, %v", sel.Provider, err)
	}
	h.UserNS, h.UserNSErr = false, "blocked"
	sel, err = Select(h, Request{Tier: policy.TierSandboxed, Enforce: enforce})
	if err != nil || sel.Provider.Name() != Core {
		t.Fatalf("abi 2 without user namespaces, truncation waived: %v, %v", sel.Provider, err)
	}
	// A backend that cannot enforce what the run needs is skipped, with
	// what it lacks as the reason.
	lacks := func(p Provider) error {
		if p.Name() == Core {
			return fmt.Errorf("%w: %s needs X%s", spec.ErrUnavailable, spec.GFSWrite, ledger.WaiveHint)
		}
		return nil
	}
	sel, err = Select(h, Request{Tier: policy.TierSandboxed, Enforce: lacks})
	if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), spec.GFSWrite+" needs X") || strings.Contains(names(sel.Skipped), "waive") {
		t.Fatalf("core lacking a guarantee: %v (skipped %s)", err, names(sel.Skipped))
	}
}
