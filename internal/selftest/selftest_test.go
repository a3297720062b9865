//go:build linux

package selftest

import (
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/probe"
	"github.com/confine-sandbox/confine/spec"
)

// The table is keyed by guarantee name: every guarantee of the ledger has
// an attack, and every row names a real guarantee, a real probe vector and
// one of the escape rows the ledger lists for that guarantee (so the
// selftest attacks each guarantee the way the escape suite does).
func TestCasesCoverEveryGuarantee(t *testing.T) {
	cases := Cases()
	vectors := probe.Vectors()
	rows := map[string][]string{}
	for _, g := range ledger.Entries() {
		rows[g.Name] = g.Vectors
	}
	names := map[string]bool{}
	per := map[string]int{}
	for _, c := range cases {
		if names[c.Name] {
			t.Errorf("duplicate case %q", c.Name)
		}
		names[c.Name] = true
		patterns, ok := rows[c.Guarantee]
		if !ok {
			t.Errorf("case %q: guarantee %q is not in the ledger", c.Name, c.Guarantee)
		}
		if !slices.ContainsFunc(patterns, func(p string) bool { return rowMatches(p, c.Name) }) {
			t.Errorf("case %q: not among the ledger's escape rows for %s %v", c.Name, c.Guarantee, patterns)
		}
		if !slices.Contains(vectors, c.Vector) {
			t.Errorf("case %q: the probe has no vector %q", c.Name, c.Vector)
		}
		if c.Setup == nil {
			t.Errorf("case %q: no setup", c.Name)
		}
		per[c.Guarantee]++
	}
	for _, g := range ledger.Names() {
		if per[g] == 0 {
			t.Errorf("guarantee %s has no selftest vector", g)
		}
	}
}

// rowMatches is the ledger's row pattern: exact, or a trailing "*" for a
// prefix.
func rowMatches(pattern, name string) bool {
	if p, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, p)
	}
	return pattern == name
}

func TestSelect(t *testing.T) {
	cases := Cases()
	tests := []struct {
		name    string
		only    []string
		want    []string // case names, nil: all
		wantErr bool
	}{
		{"all", nil, nil, false},
		{"one vector", []string{"kill"}, []string{"kill"}, false},
		{"a guarantee", []string{spec.GNoPrivilege}, []string{"chmod-setuid-workdir", "open-creat-setgid", "open-creat-setuid", "privilege"}, false},
		{"vector and guarantee", []string{"kill", spec.GNoPrivilege}, []string{"chmod-setuid-workdir", "kill", "open-creat-setgid", "open-creat-setuid", "privilege"}, false},
		{"unknown", []string{"no-such-vector"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Select(cases, tt.only)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if tt.want == nil {
				if len(got) != len(cases) {
					t.Fatalf("got %d cases, want all %d", len(got), len(cases))
				}
				return
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			slices.Sort(names)
			want := slices.Clone(tt.want)
			slices.Sort(want)
			if !slices.Equal(names, want) {
				t.Fatalf("got %v, want %v", names, want)
			}
		})
	}
}

func TestSummarise(t *testing.T) {
	v := func(g, verdict string) VectorResult {
		return VectorResult{Guarantee: g, Vector: g + "-" + verdict, Verdict: verdict, Mechanism: "m-" + g}
	}
	tests := []struct {
		name    string
		vectors []VectorResult
		want    map[string]string // guarantee -> verdict
		ok      bool
	}{
		{"all blocked", []VectorResult{v("a", Blocked), v("a", Blocked)}, map[string]string{"a": Blocked}, true},
		{"n/a and blocked", []VectorResult{v("a", NotApplicable), v("a", Blocked)}, map[string]string{"a": Blocked}, true},
		{"only n/a", []VectorResult{v("a", NotApplicable)}, map[string]string{"a": NotApplicable}, true},
		{"one escape wins", []VectorResult{v("a", Blocked), v("a", Escaped), v("a", Error)}, map[string]string{"a": Escaped}, false},
		{"error", []VectorResult{v("a", Blocked), v("a", Error)}, map[string]string{"a": Error}, false},
		{"per guarantee", []VectorResult{v("a", Blocked), v("b", Escaped)}, map[string]string{"a": Blocked, "b": Escaped}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := &Report{Vectors: tt.vectors}
			rep.summarise()
			if rep.OK != tt.ok {
				t.Errorf("OK = %v, want %v", rep.OK, tt.ok)
			}
			if len(rep.Guarantees) != len(tt.want) {
				t.Fatalf("got %d guarantees, want %d: %+v", len(rep.Guarantees), len(tt.want), rep.Guarantees)
			}
			for _, g := range rep.Guarantees {
				if g.Verdict != tt.want[g.Name] {
					t.Errorf("%s: verdict %s, want %s", g.Name, g.Verdict, tt.want[g.Name])
				}
				if g.Mechanism != "m-"+g.Name {
					t.Errorf("%s: mechanism %q", g.Name, g.Mechanism)
				}
			}
		})
	}
}
