//go:build linux

package planner

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// TestBuildNamesItsBackend builds each backend's plan from one Inputs:
// the plan names its backend as a value that agrees with its sections,
// two plans built from the same Inputs are equal and share no memory
// (changing one changes neither the other nor the Inputs), so the core's
// plan a run may fall back to is its own. The work tree is a git one:
// its .git is guarded, by Landlock (LandlockGuarded) in the core's plan
// alone. The supervisor gets the calls naming another process in the
// core's plan alone (no PID namespace), the persistence guard's creating
// calls where its supervisor can refuse a name (not bubblewrap's), and
// the guarded work tree's in the core's.
func TestBuildNamesItsBackend(t *testing.T) {
	work, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(work, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := host.ProbeBwrap(host.Probe())
	prof := policy.Profile{Name: "test", Network: spec.DenyAll,
		Waive: []string{spec.GProcesses}}
	in, err := Validate(&spec.CommandSpec{Worktree: work, Program: "sh"}, prof, h, prof.Limits.WithDefaults(), "/usr/bin:/bin", nil)
	if err != nil {
		t.Fatal(err)
	}
	td, err := tmpdir.Create(-1, -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(td.Remove)
	if err := td.Wait(); err != nil {
		t.Fatal(err)
	}
	res := Resources{Tmp: td, Caches: []string{"GOCACHE=" + filepath.Join(td.Root, "gocache")}}
	for _, tc := range []struct {
		provider                       string
		want                           plan.Backend
		procTargets, create, guardTree bool
	}{
		{provider.Core, plan.BackendCore, true, true, true},
		{provider.Namespaces, plan.BackendNamespaces, false, true, false},
		{provider.Bubblewrap, plan.BackendBwrap, false, false, false},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			p, ok := provider.Lookup(tc.provider)
			if !ok {
				t.Fatalf("no provider %s", tc.provider)
			}
			if _, err := in.Guarantees(p); err != nil {
				t.Skipf("not applicable: this host's ledger refuses %s (%v)", tc.provider, err)
			}
			before := inputSlices(in)
			a, err := in.Build(p, res)
			if err != nil {
				t.Fatal(err)
			}
			b, err := in.Build(p, res)
			if err != nil {
				t.Fatal(err)
			}
			if a.Plan.Backend != tc.want || a.Plan.CheckBackend() != nil {
				t.Fatalf("plan backend %q (%v), want %q", a.Plan.Backend, a.Plan.CheckBackend(), tc.want)
			}
			sc := a.Plan.Seccomp
			if got := [3]bool{sc.NotifyProcTargets, sc.NotifyCreate, sc.NotifyGuardTree}; got != [3]bool{tc.procTargets, tc.create, tc.guardTree} {
				t.Fatalf("plan notifies process targets, creating calls, guard tree: %v, want %v", got, [3]bool{tc.procTargets, tc.create, tc.guardTree})
			}
			guarded := []string{filepath.Join(work, ".git")}
			if !slices.Equal(a.Plan.Guarded, guarded) {
				t.Fatalf("plan guards %q, want %q", a.Plan.Guarded, guarded)
			}
			byLandlock := guarded
			if tc.want != plan.BackendCore {
				byLandlock = nil
			}
			if !slices.Equal(a.Plan.LandlockGuarded(), byLandlock) {
				t.Fatalf("Landlock guards %q under %s, want %q", a.Plan.LandlockGuarded(), tc.want, byLandlock)
			}
			if !reflect.DeepEqual(a.Plan, b.Plan) {
				t.Fatalf("two builds differ:\n%+v\n%+v", a.Plan, b.Plan)
			}
			a.Plan.Env[0], a.Plan.Argv[0] = "CHANGED=1", "changed"
			a.Plan.Landlock.ReadWrite[0], a.Plan.Landlock.ReadExec[0] = "/changed", "/changed"
			a.Plan.WritableRoots[0] = "/changed"
			if reflect.DeepEqual(a.Plan, b.Plan) {
				t.Fatal("changing one plan changed the other: they share memory")
			}
			if !reflect.DeepEqual(before, inputSlices(in)) {
				t.Fatal("changing a plan changed the Inputs it was built from")
			}
		})
	}
}

// inputSlices copies what of in a plan is built from.
func inputSlices(in *Inputs) [][]string {
	var out [][]string
	for _, s := range [][]string{in.Env, in.argv, in.RW, in.RO, in.optional, in.Guarded, in.Profile.Devices} {
		out = append(out, slices.Clone(s))
	}
	return out
}
