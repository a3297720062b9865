package ledger

import (
	"fmt"
	"strings"

	"github.com/confine-sandbox/confine/internal/landlock"
)

// Markdown renders the ledger as docs/guarantees.md's guarantee table: for each
// guarantee, what each layer contributes and what it needs, and the
// escape rows that attack it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| guarantee | core (`landlock+seccomp`; every backend) | `landlock+namespaces` adds | `bubblewrap` adds | macOS `seatbelt` (on its own; unverified, see Platforms) | attacked by (`escape` rows) |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, g := range table {
		cells := map[Layer][]string{}
		for _, m := range g.Mechanisms {
			cells[m.Layer] = append(cells[m.Layer], m.markdown())
		}
		vs := make([]string, len(g.Vectors))
		for i, v := range g.Vectors {
			vs[i] = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| `%s`: %s | %s | %s | %s | %s | %s |\n", g.Name, g.Promise,
			strings.Join(cells[Core], "<br>"), strings.Join(cells[Namespaces], "<br>"),
			strings.Join(cells[Bwrap], "<br>"), orRefused(cells[Seatbelt]), strings.Join(vs, ", "))
	}
	return b.String()
}

// orRefused joins a macOS cell; a guarantee Seatbelt cannot enforce on
// its own says so (runs there are refused unless a profile waives it).
func orRefused(ms []string) string {
	for _, m := range ms {
		if !strings.Contains(m, "defence in depth") {
			return strings.Join(ms, "<br>")
		}
	}
	return strings.Join(append([]string{"**refused** (no mechanism; waive by name)"}, ms...), "<br>")
}

// markdown is one mechanism with its conditions, for the table.
func (m Mechanism) markdown() string {
	t := strings.ReplaceAll(m.Text, "{landlock}", "Landlock")
	t = strings.ReplaceAll(t, "{foreign}", foreignMarkdown())
	t = strings.ReplaceAll(t, "|", "\\|")
	var when []string
	if !m.Sufficient {
		when = append(when, "defence in depth")
	}
	if m.Feature != "" {
		f, _ := landlock.FeatureByName(m.Feature)
		when = append(when, fmt.Sprintf("ABI >= %d", f.ABI))
	}
	if m.Below != "" {
		f, _ := landlock.FeatureByName(m.Below)
		when = append(when, fmt.Sprintf("ABI < %d", f.ABI))
	}
	switch m.Who {
	case NonRoot:
		when = append(when, "command not uid 0")
	case Root:
		when = append(when, "command uid 0")
	}
	if m.PidsCgroup {
		when = append(when, "a pids cgroup can be made")
	}
	if m.PidMax {
		when = append(when, "Linux 6.14+")
	}
	if m.UnlessPidsCgroup {
		when = append(when, "no pids cgroup can be made")
	}
	if m.MemoryCgroup {
		when = append(when, "a memory cgroup can be made")
	}
	if m.UnlessMemoryCgroup {
		when = append(when, "no memory cgroup can be made")
	}
	if len(when) == 0 {
		return t
	}
	return t + " (" + strings.Join(when, "; ") + ")"
}

// foreignMarkdown is "{foreign}" for every architecture, for the table.
func foreignMarkdown() string {
	per := make([]string, len(foreignABIs))
	for i, a := range foreignABIs {
		per[i] = a.GOARCH + ": " + strings.Join(a.ABIs, ", ")
	}
	return "other ABIs' calls killed (" + strings.Join(per, "; ") + ")"
}
