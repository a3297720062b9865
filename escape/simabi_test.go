//go:build linux

package escape

import (
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// A run of the suite at a simulated Landlock ABI really runs at it: the
// CLI the suite starts reports that ABI (so a build without the
// confine_simabi tag, which ignores the variable, cannot pass for an old
// ABI's run).
func TestSimulatedABIInForce(t *testing.T) {
	v, ok := os.LookupEnv("CONFINE_SIM_LANDLOCK_ABI")
	if !ok {
		t.Skip("no simulated Landlock ABI asked for (CONFINE_SIM_LANDLOCK_ABI unset)")
	}
	want, err := strconv.Atoi(v)
	if err != nil || want < 1 {
		t.Fatalf("CONFINE_SIM_LANDLOCK_ABI=%q: want a positive number", v)
	}
	if !landlock.Simulated {
		t.Fatal("CONFINE_SIM_LANDLOCK_ABI is set but this build ignores it: build with -tags confine_simabi")
	}
	if k, _, err := landlock.ABI(); err == nil && k < want {
		want = k
	}
	c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: 0, Dir: t.TempDir(), Args: []string{"check", "--json"}}
	o := execute(t, c.Command())
	var ck struct {
		Host struct {
			ABI int `json:"landlock_abi"`
		} `json:"host"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &ck); err != nil {
		t.Fatalf("check --json (exit %d): %v\n%s", o.code, err, o.stderr)
	}
	if ck.Host.ABI != want {
		t.Fatalf("confine check reports Landlock ABI %d, want the simulated %d", ck.Host.ABI, want)
	}
}
