//go:build linux

package provider

import (
	"reflect"
	"regexp"
	"slices"
	"testing"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/launch"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seatbelt"
)

// factsMatrix is the host and run circumstances the ledger's decisions
// are compared under: every Landlock ABI, with and without user
// namespaces and bwrap, as root or not, deny-all or allowlist, with and
// without a .git to guard.
func factsMatrix(pr Provider) []ledger.Facts {
	var out []ledger.Facts
	for abi := 1; abi <= 7; abi++ {
		for _, h := range []host.Info{
			{LandlockABI: abi, Seccomp: true},
			{LandlockABI: abi, Seccomp: true, UserNS: true, PidsCgroupRoot: "/sys/fs/cgroup/x", Bwrap: "/usr/bin/bwrap"},
		} {
			for _, root := range []bool{false, true} {
				f := Facts(h, pr, root, 100)
				for _, allow := range []bool{false, true} {
					for _, git := range []bool{false, true} {
						f.Allowlist, f.GitDir = allow, git
						out = append(out, f)
					}
				}
			}
		}
	}
	return out
}

// backendNamed finds the backends a decision's Missing text sends the
// reader to.
var backendNamed = regexp.MustCompile(`(?:the (\S+) backend|a backend other than (\S+)) \(`)

// TestEveryBackendLaunches walks the registry: every backend selection
// can pick is a launch backend (launch.For) of the same name, whose
// ledger contribution is what its guarantees are decided from; every
// launch backend is one provider's; a backend named in the ledger's
// refusals exists; and each layer a backend claims changes some decision.
func TestEveryBackendLaunches(t *testing.T) {
	base := plan.Plan{UID: -1, GID: -1}
	full := host.Info{LandlockABI: 7, Seccomp: true, UserNS: true, Bwrap: "/usr/bin/bwrap", BwrapChecked: true}
	known := map[string]bool{seatbelt.Name: true}
	for _, impl := range launch.Backends() {
		known[string(impl.Name())] = true
	}
	reached := map[plan.Backend]bool{}
	for _, pr := range Registry() {
		b, _ := pr.Section(base)
		impl, ok := launch.For(b)
		if b == "" {
			// Not built: never available, nothing claimed, no launch.
			if avail, _ := pr.Available(full); avail || pr.Ledger() != nil || known[pr.Name()] {
				t.Errorf("%s: unbuilt backend available %v, ledger %v, launch %v", pr.Name(), avail, pr.Ledger(), known[pr.Name()])
			}
			continue
		}
		if !ok || impl.Name() != b || string(b) != pr.Name() {
			t.Errorf("%s: plans for %q, launched by %v", pr.Name(), b, impl)
			continue
		}
		if reached[b] {
			t.Errorf("%s: a second provider for backend %s", pr.Name(), b)
		}
		reached[b] = true
		if !slices.Equal(pr.Ledger(), impl.Ledger()) {
			t.Errorf("%s: provider's ledger layers %v, its launch's %v", pr.Name(), pr.Ledger(), impl.Ledger())
		}
		// Only a backend chosen automatically, with namespaces of its own,
		// moves to the core when they fail; one asked for by name is
		// refused instead.
		if want := pr.Automatic() && pr.Namespaces(); impl.FallsBack() != want {
			t.Errorf("%s: falls back %v, want %v", pr.Name(), impl.FallsBack(), want)
		}
		checkLedger(t, pr, impl, known)
	}
	for _, impl := range launch.Backends() {
		if !reached[impl.Name()] {
			t.Errorf("launch backend %s is no provider's", impl.Name())
		}
	}
}

// checkLedger compares impl's ledger contribution with the ledger's
// decisions for pr under every facts of the matrix.
func checkLedger(t *testing.T, pr Provider, impl launch.Backend, known map[string]bool) {
	t.Helper()
	layers := impl.Ledger()
	if len(layers) == 0 || layers[0] != ledger.Core {
		t.Errorf("%s: ledger layers %v, want the core's first", pr.Name(), layers)
	}
	// Its own layers are the ones the ledger calls this backend's; a
	// backend with namespaces of its own has one.
	for _, l := range layers[1:] {
		if l.Backend() != pr.Name() {
			t.Errorf("%s: claims layer %s, which the ledger calls the %s backend's", pr.Name(), l, l.Backend())
		}
	}
	if pr.Namespaces() != (len(layers) > 1) {
		t.Errorf("%s: namespaces %v, but ledger layers %v", pr.Name(), pr.Namespaces(), layers)
	}
	changes := map[ledger.Layer]bool{}
	for _, f := range factsMatrix(pr) {
		ds := ledger.Decide(layers, f)
		if !reflect.DeepEqual(ds, ledger.Decide(pr.Ledger(), f)) {
			t.Fatalf("%s: the provider's decisions differ from its launch's under %+v", pr.Name(), f)
		}
		for _, d := range ds {
			for _, m := range backendNamed.FindAllStringSubmatch(d.Missing, -1) {
				name := m[1] + m[2]
				if !known[name] || name == pr.Name() && m[1] != "" {
					t.Errorf("%s: %s needs %q: names backend %q", pr.Name(), d.Name, d.Missing, name)
				}
			}
		}
		for i, l := range layers[1:] {
			without := slices.Delete(slices.Clone(layers), i+1, i+2)
			if !reflect.DeepEqual(ds, ledger.Decide(without, f)) {
				changes[l] = true
			}
		}
	}
	for _, l := range layers[1:] {
		if !changes[l] {
			t.Errorf("%s: layer %s changes no decision", pr.Name(), l)
		}
	}
}
