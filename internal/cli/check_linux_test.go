//go:build linux

package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// `confine check` fits a screen by default (the backend, one line per
// guarantee, a summary); --verbose prints every mechanism whole and the
// other backends' ledgers; --json carries the data.
func TestCheckShortByDefault(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	js := cli(t, u, wd, "check", "--json")
	var data struct {
		Backend    string            `json:"backend"`
		Guarantees []ledger.Decision `json:"guarantees"`
		OK         bool              `json:"ok"`
	}
	if err := json.Unmarshal([]byte(js.Stdout), &data); err != nil {
		t.Fatalf("check --json: %v\n%s", err, js.Stdout)
	}
	if len(data.Guarantees) == 0 {
		t.Fatal("check --json lists no guarantee")
	}
	short := cli(t, u, wd, "check")
	long := cli(t, u, wd, "check", "--verbose")
	for _, r := range []struct {
		name string
		res  testutil.Result
	}{{"json", js}, {"short", short}, {"verbose", long}} {
		if want := map[bool]int{true: 0, false: 1}[data.OK]; r.res.Code != want {
			t.Errorf("check (%s): exit %d, want %d (ok=%v); stderr %s", r.name, r.res.Code, want, data.OK, r.res.Stderr)
		}
	}
	lines := strings.Split(strings.TrimSuffix(short.Stdout, "\n"), "\n")
	if len(lines) > 25 {
		t.Errorf("check prints %d lines, want at most 25:\n%s", len(lines), short.Stdout)
	}
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > summaryWidth {
			t.Errorf("line of %d characters, want at most %d: %q", n, summaryWidth, l)
		}
	}
	if data.Backend != "" && !strings.HasPrefix(short.Stdout, "backend:    "+data.Backend+" ") {
		t.Errorf("check does not start with the backend %q:\n%s", data.Backend, short.Stdout)
	}
	held, missing, waived := tally(data.Guarantees)
	if want := fmt.Sprintf("guarantees: %d held, %d missing, %d waived\n", held, missing, waived); !strings.Contains(short.Stdout, want) {
		t.Errorf("check lacks the summary %q:\n%s", want, short.Stdout)
	}
	for _, g := range data.Guarantees {
		var line string
		for _, l := range lines {
			if f := strings.Fields(l); len(f) > 0 && f[0] == g.Name {
				line = l
			}
		}
		if line == "" {
			t.Errorf("check has no line for %s:\n%s", g.Name, short.Stdout)
			continue
		}
		if g.Missing != "" && !strings.Contains(line, "MISSING") {
			t.Errorf("%s is missing but its line says %q", g.Name, line)
		}
		// The whole mechanism is in --verbose, and its start in the short line.
		if g.Mechanism != "" {
			if !strings.Contains(long.Stdout, g.Mechanism) {
				t.Errorf("check --verbose lacks %s's mechanism %q", g.Name, g.Mechanism)
			}
			head := []rune(g.Mechanism)
			if len(head) > 40 {
				head = head[:40]
			}
			if !strings.Contains(line, string(head)) {
				t.Errorf("%s's line %q does not begin its mechanism %q", g.Name, line, g.Mechanism)
			}
		}
	}
	if !strings.Contains(long.Stdout, "landlock:") || len(long.Stdout) <= len(short.Stdout) {
		t.Errorf("check --verbose is not the full report:\n%s", long.Stdout)
	}
}
