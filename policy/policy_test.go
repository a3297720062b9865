package policy

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestPathComponents(t *testing.T) {
	ro := []string{"/usr", "/bin"}
	rw := []string{"/usr/local/work"}
	tests := []struct {
		c  string
		ok bool
	}{
		{"/usr/bin", true}, {"", false}, {"usr/bin", false}, {"/usr/../etc", false},
		{"/usr/local/work/bin", false}, {"/opt/tool", false}, {"/usr/bin\x00x", false},
	}
	for _, tt := range tests {
		if err := checkPathComponent(tt.c, ro, rw); (err == nil) != tt.ok {
			t.Errorf("checkPathComponent(%q) = %v, want ok=%v", tt.c, err, tt.ok)
		}
	}
	path, omitted := DerivePATH("/usr/bin::/opt/x:/usr/bin:rel", ro, rw)
	if path != "/usr/bin" || !reflect.DeepEqual(omitted, []string{"", "/opt/x", "rel"}) {
		t.Fatalf("DerivePATH = %q, %q", path, omitted)
	}
}

func TestTiers(t *testing.T) {
	if err := CheckTier(TierHostile); !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), "microVM") {
		t.Fatalf("tier 3: %v", err)
	}
	if err := CheckTier(TierSandboxed); err != nil {
		t.Fatal(err)
	}
	for _, tr := range []Tier{TierNone, TierStructured, 7} {
		if err := CheckTier(tr); !errors.Is(err, spec.ErrInvalidSpec) {
			t.Errorf("tier %d: %v", tr, err)
		}
	}
}

func TestValidProfileName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"go", true}, {"a", true}, {"A-b_c.9", true}, {"0x", true},
		{strings.Repeat("a", 64), true}, {strings.Repeat("a", 65), false},
		{"", false}, {"-a", false}, {".a", false}, {"_a", false},
		{"a b", false}, {"a/b", false}, {"é", false}, {"a\x00", false},
	} {
		if got := validProfileName(tc.name); got != tc.ok {
			t.Errorf("validProfileName(%q) = %v, want %v", tc.name, got, tc.ok)
		}
	}
}
