//go:build linux

package testutil

import (
	"fmt"
	"strings"
)

// GuardProfile is the text of a profile named name that changes the
// persistence guard's set ([guard], docs/guard.md): the rows refuse moved
// to refused, git's hooks moved to reported (a waiver of
// no-git-persistence), a refused row of its own (any Makefile) and a
// reported one (ci/run.sh at the top level). head is put before [guard]
// (a Tier 1 profile's tier and host_ops).
func GuardProfile(name, head string, refuse ...string) string {
	quoted := make([]string, len(refuse))
	for i, r := range refuse {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	return fmt.Sprintf(`name = %q
%s[guard]
refuse = [%s]
report = ["git-hooks"]
[guard.add.makefile]
pattern = "**/Makefile"
action = "refuse"
why = "make runs it"
[guard.add.ci]
pattern = "ci/run.sh"
action = "report"
`, name, head, strings.Join(quoted, ", "))
}
