package ledger

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/spec"
)

var (
	coreOnly  = []Layer{Core}
	withNS    = []Layer{Core, Namespaces}
	withBwrap = []Layer{Core, Bwrap}
)

// The ledger names exactly the policy's guarantees, in report order, and
// every row is complete: a promise, a sufficient mechanism in the core
// (every backend has the core, so every guarantee must be enforceable
// without namespaces on some kernel), vectors, and known features.
func TestTableComplete(t *testing.T) {
	if got, want := Names(), spec.Guarantees(); !slices.Equal(got, want) {
		t.Fatalf("ledger names %v, policy names %v", got, want)
	}
	for _, g := range Entries() {
		if g.Promise == "" {
			t.Errorf("%s: no promise", g.Name)
		}
		if len(g.Vectors) == 0 {
			t.Errorf("%s: no escape vector attacks it", g.Name)
		}
		coreSuff := false
		for _, m := range g.Mechanisms {
			if m.Text == "" {
				t.Errorf("%s: a mechanism without text", g.Name)
			}
			if m.Feature != "" {
				if _, ok := landlock.FeatureByName(m.Feature); !ok {
					t.Errorf("%s: unknown Landlock feature %q", g.Name, m.Feature)
				}
			}
			if m.Layer == Core && m.Sufficient {
				coreSuff = true
			}
		}
		if !coreSuff {
			t.Errorf("%s: no sufficient core mechanism (a stock container could never enforce it)", g.Name)
		}
	}
}

// Entries is a copy: changing it changes no decision.
func TestEntriesIsACopy(t *testing.T) {
	e := Entries()
	e[0].Mechanisms[0].Text = "nothing"
	e[0].Vectors[0] = "nothing"
	if Entries()[0].Mechanisms[0].Text == "nothing" || Entries()[0].Vectors[0] == "nothing" {
		t.Fatal("Entries shares the table")
	}
}

// Decide remembers its answers per backend and facts: a second call gives
// what a fresh computation gives, for every pair, and a caller that
// changes its copy changes no later answer.
func TestDecideRemembered(t *testing.T) {
	facts := []Facts{
		{LandlockABI: 6, Seccomp: true},
		{LandlockABI: 6, Seccomp: true, RootCommand: true, PidsCgroup: true, PidMax: true, MemoryCgroup: true},
		{LandlockABI: 1},
		{Seccomp: true, GitDir: true, Allowlist: true},
	}
	for _, layers := range [][]Layer{coreOnly, withNS, withBwrap} {
		for _, f := range facts {
			fresh := make([]Decision, 0, len(table))
			for _, g := range table {
				fresh = append(fresh, decide(g, layers, f))
			}
			first := Decide(layers, f)
			first[0].Mechanism, first[0].Missing = "changed by the caller", "changed"
			if second := Decide(layers, f); !slices.Equal(second, fresh) {
				t.Errorf("Decide(%v, %+v) the second time = %v, want %v", layers, f, second, fresh)
			}
		}
	}
}

func TestDecide(t *testing.T) {
	full := Facts{LandlockABI: 7, Seccomp: true}
	abi2 := Facts{LandlockABI: 2, Seccomp: true}
	tests := []struct {
		name      string
		layers    []Layer
		f         Facts
		waive     []string
		refused   []string // guarantees named in the refusal
		mentioned string   // what the refusal says is needed
		mech      map[string]string
		nomech    map[string]string // text the mechanism must not have
	}{
		{name: "everything, core", layers: coreOnly, f: full,
			mech: map[string]string{spec.GSignals: "landlock abi 7 signal scope", spec.GNoNetwork: "denies TCP"}},
		{name: "no landlock", layers: coreOnly, f: Facts{Seccomp: true},
			refused: []string{spec.GFSWrite, spec.GFSRead, spec.GSignals, spec.GNoNetwork}, mentioned: "Landlock"},
		{name: "no seccomp", layers: coreOnly, f: Facts{LandlockABI: 7},
			refused: []string{spec.GNoNetwork, spec.GFSMetadata, spec.GTerminal}, mentioned: "seccomp"},
		// Kernel 6.1 (ABI 2) without namespaces: every guarantee holds,
		// signals and truncation through the launcher.
		{name: "abi 2 core", layers: coreOnly, f: abi2,
			mech:   map[string]string{spec.GSignals: "the launcher sends kill", spec.GFSWrite: "truncate(2) resolved once"},
			nomech: map[string]string{spec.GSignals: "signal scope", spec.GFSWrite: "renames and links"}},
		{name: "abi 1 core", layers: coreOnly, f: Facts{LandlockABI: 1, Seccomp: true},
			mech: map[string]string{spec.GFSWrite: "renames and links across directories"}},
		{name: "abi 3 core: Landlock truncates", layers: coreOnly, f: Facts{LandlockABI: 3, Seccomp: true},
			nomech: map[string]string{spec.GFSWrite: "truncate(2) resolved once"}},
		{name: "abi 2 without seccomp", layers: coreOnly, f: Facts{LandlockABI: 2},
			refused: []string{spec.GFSWrite, spec.GSignals}, mentioned: "seccomp"},
		{name: "abi 6 core: scope, not the launcher", layers: coreOnly, f: Facts{LandlockABI: 6, Seccomp: true},
			mech: map[string]string{spec.GSignals: "signal scope"}, nomech: map[string]string{spec.GSignals: "the launcher sends kill"}},
		// Kernel 6.1 with user namespaces: the PID namespace keeps
		// signals in; truncation still needs ABI 3 or a waiver.
		{name: "abi 2 namespaces", layers: withNS, f: abi2,
			mech: map[string]string{spec.GSignals: "PID namespace", spec.GFSWrite: "truncate(2) resolved once"}},
		{name: "abi 3 namespaces", layers: withNS, f: Facts{LandlockABI: 3, Seccomp: true},
			mech: map[string]string{spec.GSignals: "PID namespace", spec.GUnixSockets: "refuses every abstract address"}},
		{name: "abi 3 bwrap", layers: withBwrap, f: Facts{LandlockABI: 3, Seccomp: true},
			mech: map[string]string{spec.GSignals: "bubblewrap PID namespace"}},
		{name: "root without pids cgroup, core", layers: coreOnly, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true},
			mech: map[string]string{spec.GProcesses: "counts the run's tasks"}},
		{name: "root without pids cgroup, namespaces without pid_max", layers: withNS, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true},
			mech: map[string]string{spec.GProcesses: "counts the run's tasks"}},
		{name: "root without pids cgroup or seccomp", layers: coreOnly, f: Facts{LandlockABI: 7, RootCommand: true},
			refused: []string{spec.GProcesses}, mentioned: "pids cgroup"},
		{name: "root with pids cgroup", layers: coreOnly, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true, PidsCgroup: true},
			mech: map[string]string{spec.GProcesses: "pids cgroup"}, nomech: map[string]string{spec.GProcesses: "counts"}},
		{name: "root with pid_max", layers: withNS, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true, PidMax: true, PidsCgroup: true},
			mech: map[string]string{spec.GProcesses: "pid_max"}, nomech: map[string]string{spec.GProcesses: "cgroup"}},
		{name: "root with pid_max, no pids cgroup", layers: withNS, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true, PidMax: true},
			mech: map[string]string{spec.GProcesses: "pid_max"}, nomech: map[string]string{spec.GProcesses: "counts"}},
		{name: "pid_max is not the core's", layers: coreOnly, f: Facts{LandlockABI: 7, Seccomp: true, RootCommand: true, PidMax: true},
			refused: []string{spec.GProcesses}, mentioned: "landlock+namespaces"},
		// The persistence guard: the core grants around .git on its own;
		// with namespaces the mount layout keeps it read-only instead.
		{name: "git dir, core", layers: coreOnly, f: Facts{LandlockABI: 7, Seccomp: true, GitDir: true},
			mech: map[string]string{spec.GGitPersistence: "granted one by one, and the .git only read"}, nomech: map[string]string{spec.GGitPersistence: "nothing to keep"}},
		{name: "git dir, namespaces", layers: withNS, f: Facts{LandlockABI: 2, Seccomp: true, GitDir: true},
			mech: map[string]string{spec.GGitPersistence: "bound read-only"}, nomech: map[string]string{spec.GGitPersistence: "one by one"}},
		{name: "git dir, bwrap", layers: withBwrap, f: Facts{LandlockABI: 2, Seccomp: true, GitDir: true},
			mech: map[string]string{spec.GGitPersistence: "bubblewrap mount namespace"}, nomech: map[string]string{spec.GGitPersistence: "one by one"}},
		{name: "no git dir", layers: withNS, f: full,
			mech: map[string]string{spec.GGitPersistence: "nothing to keep"}, nomech: map[string]string{spec.GGitPersistence: "read-only"}},
		{name: "namespaces add, core does not", layers: withNS, f: full,
			mech: map[string]string{spec.GNoNetwork: "+ empty network namespace", spec.GTreeKill: "+ PID namespace"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gs, err := Resolve(Decide(tt.layers, tt.f), tt.waive)
			if len(tt.refused) > 0 {
				if !errors.Is(err, spec.ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
				for _, g := range tt.refused {
					if !strings.Contains(err.Error(), g+" needs") {
						t.Errorf("refusal does not name %s: %v", g, err)
					}
				}
				if !strings.Contains(err.Error(), tt.mentioned) {
					t.Errorf("refusal does not say %q: %v", tt.mentioned, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if len(gs) != len(spec.Guarantees()) {
				t.Fatalf("%d guarantees, want %d", len(gs), len(spec.Guarantees()))
			}
			for _, g := range gs {
				if g.Waived != slices.Contains(tt.waive, g.Name) || (!g.Waived && g.Mechanism == "") {
					t.Errorf("guarantee %+v", g)
				}
				if want, ok := tt.mech[g.Name]; ok && !strings.Contains(g.Mechanism, want) {
					t.Errorf("%s: mechanism %q lacks %q", g.Name, g.Mechanism, want)
				}
				if bad, ok := tt.nomech[g.Name]; ok && strings.Contains(g.Mechanism, bad) {
					t.Errorf("%s: mechanism %q claims %q", g.Name, g.Mechanism, bad)
				}
				if slices.Equal(tt.layers, coreOnly) && strings.Contains(g.Mechanism, " namespace ") {
					t.Errorf("%s: the core claims a namespace: %q", g.Name, g.Mechanism)
				}
			}
		})
	}
}

// No decision ever claims a mechanism whose needs are not met: walk every
// mechanism against every ABI and both uid kinds.
func TestNoClaimWithoutMechanism(t *testing.T) {
	for abi := 0; abi <= len(landlock.Features()); abi++ {
		for bits := 0; bits < 8; bits++ {
			root, cg, pm := bits&1 != 0, bits&2 != 0, bits&4 != 0
			for _, layers := range [][]Layer{coreOnly, withNS, withBwrap} {
				f := Facts{LandlockABI: abi, Seccomp: true, RootCommand: root, PidsCgroup: cg, PidMax: pm}
				for _, g := range table {
					suff, extra, _ := selectFor(g, layers, f)
					for _, m := range append(suff, extra...) {
						if ok, lack := m.holds(f); !ok || !slices.Contains(layers, m.Layer) {
							t.Errorf("abi %d root %v %v: %s claims %q (lacks %q)", abi, root, layers, g.Name, m.Text, lack)
						}
					}
					if d := decide(g, layers, f); (d.Mechanism != "") != (len(suff) > 0) {
						t.Errorf("%s: decision %+v disagrees with the selection", g.Name, d)
					}
				}
			}
		}
	}
}

// A mechanism the launcher switches on only below some ABI is claimed only
// there.
func TestBelow(t *testing.T) {
	m := Mechanism{Layer: Core, Sufficient: true, Below: landlock.FeatTruncate, Text: "x"}
	for abi := 1; abi <= 7; abi++ {
		ok, lack := m.holds(Facts{LandlockABI: abi, Seccomp: true})
		if ok != (abi < 3) {
			t.Errorf("abi %d: holds %v (%s)", abi, ok, lack)
		}
	}
}
