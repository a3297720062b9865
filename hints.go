package confine

import (
	"path/filepath"
	"strings"

	"github.com/confine-sandbox/confine/spec"
)

// denialHints are the grants that allow what a denial refused, by the
// rule that refused it: the first match names the fix.
var denialHints = []struct {
	name  string
	match func(spec.Denial) bool
	hint  func(spec.Denial) string
}{
	{
		// network = "deny-all": the supervisor refuses every internet
		// socket (seccomp ReportInet).
		name: "network",
		match: func(d spec.Denial) bool {
			return d.Syscall == "socket" && d.Errno == "EAFNOSUPPORT" && strings.HasPrefix(d.Path, "AF_INET")
		},
		hint: func(spec.Denial) string {
			return `a profile with network = "allowlist" and the hosts it may reach in [allowlist] (docs/network.md)`
		},
	},
	{
		// A metadata call, truncate or link on a file outside the
		// writable roots: its directory made writable.
		name: "writable-roots",
		match: func(d spec.Denial) bool {
			return strings.Contains(d.Reason, "outside the writable roots") && filepath.IsAbs(d.Path)
		},
		hint: func(d spec.Denial) string { return "--rw " + filepath.Dir(d.Path) },
	},
}

// hintDenials fills each denial's Hint from denialHints, where it has none.
func hintDenials(ds []spec.Denial) {
	for i := range ds {
		if ds[i].Hint != "" {
			continue
		}
		for _, h := range denialHints {
			if h.match(ds[i]) {
				ds[i].Hint = h.hint(ds[i])
				break
			}
		}
	}
}
