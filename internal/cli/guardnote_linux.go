package cli

import (
	"fmt"
	"strings"

	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// guardNote explains, for a failed run, what the persistence guard costs
// under the core backend, where it fixes the work tree's top-level entries
// (a build's EACCES on mkdir node_modules says nothing of why); "" when the
// run had no such guard.
func guardNote(res *spec.CommandResult) string {
	if res.Backend != provider.Core {
		return ""
	}
	for _, g := range res.Guarantees {
		if g.Name == policy.GGitPersistence && !g.Waived && strings.Contains(g.Mechanism, "one by one") {
			return fmt.Sprintf("confine: note: the persistence guard keeps .git read-only, and under the %s backend that fixes the work tree's top-level entries: no new top-level file or directory (node_modules, target, ...) can be created; create it before the run, or waive %s in the profile",
				provider.Core, policy.GGitPersistence)
		}
	}
	return ""
}
