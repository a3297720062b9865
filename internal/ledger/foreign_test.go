package ledger

import (
	"runtime"
	"strings"
	"testing"
)

// "{foreign}" says each architecture's own foreign ABIs: arm64's results
// never claim amd64's x32 or i386, and docs/guarantees.md's table names both.
func TestForeignText(t *testing.T) {
	for _, c := range []struct {
		goarch    string
		want      string
		notWanted []string
	}{
		{"amd64", "other ABIs' calls killed (i386, x32)", []string{"AArch32"}},
		{"arm64", "other ABIs' calls killed (AArch32)", []string{"x32", "i386"}},
		{"riscv64", "other ABIs' calls killed", []string{"x32", "i386", "AArch32"}},
	} {
		got := foreignText(c.goarch)
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.goarch, got, c.want)
		}
		for _, n := range c.notWanted {
			if strings.Contains(got, n) {
				t.Errorf("%s: %q names %s", c.goarch, got, n)
			}
		}
	}
	if md := foreignMarkdown(); md != "other ABIs' calls killed (amd64: i386, x32; arm64: AArch32)" {
		t.Errorf("markdown: %q", md)
	}
	// Every decision on this host says this architecture's text and no
	// placeholder is left.
	n := 0
	for _, f := range []Facts{{LandlockABI: 6, Seccomp: true}, {LandlockABI: 6, Seccomp: true, Allowlist: true}} {
		for _, d := range Decide(withNS, f) {
			if strings.Contains(d.Mechanism, "{") {
				t.Errorf("%s: placeholder left: %s", d.Name, d.Mechanism)
			}
			if strings.Contains(d.Mechanism, foreignText(runtime.GOARCH)) {
				n++
			}
		}
	}
	if n != 2 {
		t.Errorf("%d decisions name %q, want 2 (deny-all and allowlist no-network)", n, foreignText(runtime.GOARCH))
	}
}
