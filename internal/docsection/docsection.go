// Package docsection checks a generated section of a documentation file:
// the text between two marker lines must be what the code generates, and
// CONFINE_UPDATE_DOCS=1 rewrites it. Tests use it for docs/guarantees.md
// (the ledger) and docs/seccomp.md (the filter's rules).
package docsection

import (
	"os"
	"strings"
	"testing"
)

// Check fails t unless the text of file between the lines begin and end
// (each ending in a newline) is body; under CONFINE_UPDATE_DOCS=1 it
// writes body there instead. what names the section in the failure, and
// update is the command that regenerates it.
func Check(t testing.TB, file, begin, end, body, what, update string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		t.Fatalf("%s lacks the markers %q ... %q", file, begin, end)
	}
	want := s[:i+len(begin)] + body + s[j:]
	if want == s {
		return
	}
	if os.Getenv("CONFINE_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(file, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("%s in %s differs from the code: run %s", what, file, update)
}
