//go:build linux

package seccomp

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/docsection"
	"github.com/confine-sandbox/confine/internal/plan"
)

const (
	seccompDoc = "../../docs/seccomp.md"
	beginRules = "<!-- seccomp rules: generated from internal/seccomp; CONFINE_UPDATE_DOCS=1 go test ./internal/seccomp -->\n"
	endRules   = "<!-- end of seccomp rules -->\n"
)

// switches are plan.Seccomp's boolean fields, in their order.
func switches() []string {
	var s []string
	ty := reflect.TypeOf(plan.Seccomp{})
	for i := range ty.NumField() {
		if ty.Field(i).Type.Kind() == reflect.Bool {
			s = append(s, ty.Field(i).Name)
		}
	}
	return s
}

// switchedOn is the configuration for arch with the switch named on
// alone set ("": none).
func switchedOn(arch plan.Arch, on string) plan.Seccomp {
	cfg := plan.Seccomp{Arch: arch}
	if on != "" {
		reflect.ValueOf(&cfg).Elem().FieldByName(on).SetBool(true)
	}
	return cfg
}

// rulesMarkdown is the filter's description as a table: each rule of
// Denied on amd64 with the plan.Seccomp switches that add it (or, for a rule
// every filter has, those that remove it), from the same rules Build
// compiles.
func rulesMarkdown(t *testing.T) string {
	denied := func(on string) []Rule {
		rs, err := Denied(switchedOn(AMD64, on))
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	base := denied("")
	sws := switches()
	// The order: a switch's rules where the filter tries them, after the
	// rule before them, else before the call's first rule. Later switches
	// first, so that an earlier one's rules end up before theirs (the
	// order their rules are compiled in).
	order := slices.Clone(base)
	for _, sw := range slices.Backward(sws) {
		prev := -1
		for _, r := range denied(sw) {
			if k := slices.Index(order, r); k >= 0 {
				prev = k
				continue
			}
			at := slices.IndexFunc(order, func(o Rule) bool { return o.Syscall == r.Syscall })
			if prev >= 0 && order[prev].Syscall == r.Syscall {
				at = prev + 1
			} else if at < 0 {
				at = len(order)
			}
			order = slices.Insert(order, at, r)
			prev = at
		}
	}
	by, unless := map[Rule][]string{}, map[Rule][]string{}
	for _, sw := range sws {
		rs := denied(sw)
		for _, r := range rs {
			if !slices.Contains(base, r) {
				by[r] = append(by[r], sw)
			}
		}
		for _, r := range base {
			if !slices.Contains(rs, r) {
				unless[r] = append(unless[r], sw)
			}
		}
	}
	slices.SortStableFunc(order, func(a, b Rule) int { return strings.Compare(a.Syscall, b.Syscall) })
	var b strings.Builder
	b.WriteString("| call | when | result | in the filter |\n|---|---|---|---|\n")
	for _, r := range order {
		when := r.When
		if when == "" {
			when = "always"
		}
		result := "notify the supervisor"
		if !r.Notify {
			result = "`" + errnoName(r) + "`"
		}
		in := "always"
		if sw := by[r]; len(sw) > 0 {
			in = "with " + strings.Join(sw, " or ")
		} else if sw := unless[r]; len(sw) > 0 {
			in = "unless " + strings.Join(sw, " or ")
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", r.Syscall, strings.ReplaceAll(when, "|", "\\|"), result, in)
	}
	return b.String()
}

func errnoName(r Rule) string {
	s := r.String()
	i := strings.LastIndex(s, ": ")
	return strings.Fields(s[i+2:])[0]
}

// The rule table in docs/seccomp.md is generated from the rules the filter
// is compiled from; this test fails when they differ.
func TestRulesDoc(t *testing.T) {
	docsection.Check(t, seccompDoc, beginRules, endRules, rulesMarkdown(t), "the rule table",
		"CONFINE_UPDATE_DOCS=1 go test ./internal/seccomp")
}
