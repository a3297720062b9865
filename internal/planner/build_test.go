//go:build linux

package planner

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/host"
)

// TestValidateWalksTheSharedTable walks CheckRun's table (validate_test.go)
// through Linux's whole Validate: the same inputs are refused with the
// same words, the roots resolved by Validate itself and the host's
// system roots granted.
func TestValidateWalksTheSharedTable(t *testing.T) {
	d, cases := runCases(t)
	h := host.Info{EUID: -1}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec(d)
			prof := tc.profile()
			in, err := Validate(s, prof, h, prof.Limits.WithDefaults(), d.callerPATH, func(int) []ctlpaths.Path { return d.controls })
			tc.judge(t, err)
			if err == nil && in.Prog == "" {
				t.Errorf("accepted without a program: %+v", in)
			}
		})
	}
}
