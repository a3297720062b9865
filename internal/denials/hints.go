// Package denials completes a run's refusals: the kernel's own refusals
// that a command's error messages name, inferred from its stderr (Infer),
// and for each refusal the grant that would allow it (Hint).
package denials

import (
	"path/filepath"
	"regexp"
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

// Hint fills each denial's Hint from denialHints, where it has none.
func Hint(ds []spec.Denial) {
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

// refusalMessages are the error messages through which a command shows a
// refusal the kernel made on its own (Landlock, the read-only mount tree),
// which no supervisor sees: the path, and the errno the message stands for.
var refusalMessages = []struct {
	re    *regexp.Regexp
	path  int // submatch of the path
	msg   int // submatch of the message
	errno map[string]string
}{
	// sh, coreutils, most C programs: "PATH: MESSAGE", the path maybe quoted.
	{regexp.MustCompile(`(/[^\s:'"]+)['"]?: (Read-only file system|Permission denied|No such file or directory|Directory nonexistent)`), 1, 2, messageErrno},
	// Python: "[Errno 30] Read-only file system: '/path'".
	{regexp.MustCompile(`\[Errno \d+\] (Read-only file system|Permission denied|No such file or directory): '(/[^']+)'`), 2, 1, messageErrno},
}

var messageErrno = map[string]string{
	"Read-only file system":     "EROFS",
	"Permission denied":         "EACCES",
	"No such file or directory": "ENOENT",
	"Directory nonexistent":     "ENOENT", // dash's "cannot create"
}

// seenRefusal is a path and errno a command's error message names.
type seenRefusal struct{ path, errno string }

// refusalsIn lists the refusals text names, in order, each path once.
func refusalsIn(text string) []seenRefusal {
	var out []seenRefusal
	seen := map[string]bool{}
	for _, line := range strings.Split(text, "\n") {
		for _, m := range refusalMessages {
			for _, sm := range m.re.FindAllStringSubmatch(line, -1) {
				p := filepath.Clean(sm[m.path])
				if seen[p] {
					continue
				}
				seen[p] = true
				out = append(out, seenRefusal{p, m.errno[sm[m.msg]]})
			}
		}
	}
	return out
}
