//go:build linux

package selftest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as one indented JSON object.
func (rep *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(rep)
}

// WriteText writes the ledger: per guarantee the mechanism this host's
// runs reported, then one line per vector (control, confined, verdict),
// then the summary.
func (rep *Report) WriteText(w io.Writer) error {
	prof := ""
	if rep.Profile != "" {
		prof = ", --profile " + rep.Profile
	}
	fmt.Fprintf(w, "confine selftest as uid %d, --backend %s%s: confined runs used %s (layers %s)\n\n",
		rep.UID, rep.Backend, prof, orNone(strings.Join(rep.Backends, ", ")), orNone(strings.Join(rep.Layers, ", ")))
	byG := map[string][]VectorResult{}
	vw, cw := len("vector"), len("control")
	for _, v := range rep.Vectors {
		byG[v.Guarantee] = append(byG[v.Guarantee], v)
		vw = max(vw, len(v.Vector))
		cw = max(cw, len([]rune(clip(v.Control, controlWidth))))
	}
	fmt.Fprintf(w, "%-9s %-*s %-*s %s\n", "verdict", vw, "vector", cw, "control", "confined")
	for _, g := range rep.Guarantees {
		mech := g.Mechanism
		if mech == "" {
			mech = "(no confined run reported one)"
		}
		fmt.Fprintf(w, "\n%s [%s]\n  mechanism: %s\n", g.Name, g.Verdict, mech)
		for _, v := range byG[g.Name] {
			conf := v.Confined
			if conf == "" {
				conf = "-"
			}
			c := clip(v.Control, controlWidth)
			fmt.Fprintf(w, "  %-7s %-*s %s%s %s\n", v.Verdict, vw, v.Vector, c, strings.Repeat(" ", cw-len([]rune(c))), clip(conf, 100))
		}
	}
	fmt.Fprintf(w, "\n%d vectors: %d blocked, %d escaped, %d not applicable here, %d errors\n",
		len(rep.Vectors), rep.Blocked, rep.Escaped, rep.NA, rep.Errors)
	var untested []string
	for _, g := range rep.Guarantees {
		if g.Verdict == NotApplicable {
			untested = append(untested, g.Name)
		}
	}
	if len(untested) > 0 {
		fmt.Fprintf(w, "not attacked on this host (no vector applies): %s\n", strings.Join(untested, ", "))
	}
	switch {
	case rep.Escaped > 0:
		fmt.Fprintln(w, "RESULT: ESCAPED: the sandbox did not hold on this host (see the rows marked escaped)")
	case rep.Errors > 0:
		fmt.Fprintln(w, "RESULT: INCOMPLETE: some vectors could not be judged (see the rows marked error)")
	default:
		fmt.Fprintln(w, "RESULT: every applicable attack was blocked")
	}
	return nil
}

// controlWidth is how much of the control's outcome a table line shows.
const controlWidth = 60

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// clip shortens s to n runes for the table (the JSON has it whole).
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
