//go:build linux

package seccomp

import (
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/plan"
)

// foreignCall is one call of a foreign ABI as the filter sees it: its
// seccomp_data.arch and nr (socket(), or socketcall() where the ABI has
// it).
var foreignCall = map[string]struct{ audit, nr uint32 }{
	"i386":    {unix.AUDIT_ARCH_I386, 102},           // socketcall via int 0x80
	"x32":     {unix.AUDIT_ARCH_X86_64, x32Bit | 41}, // x32 socket
	"AArch32": {unix.AUDIT_ARCH_ARM, 281},            // AArch32 socket
}

// The ledger's per-architecture text of what the filter kills
// (ledger.ForeignABIs) holds: each named ABI's call is killed by that
// architecture's filter, and every architecture the filter is built for
// has a row.
func TestLedgerForeignABIs(t *testing.T) {
	rows := ledger.ForeignABIs()
	for _, arch := range []plan.Arch{AMD64, ARM64} {
		abis, ok := rows[string(arch)]
		if !ok || len(abis) == 0 {
			t.Errorf("the ledger names no foreign ABI for %v", arch)
			continue
		}
		for _, abi := range abis {
			c, ok := foreignCall[abi]
			if !ok {
				t.Errorf("%v: the ledger names %q, which this test cannot make", arch, abi)
				continue
			}
			v := newVM(t, plan.Seccomp{Arch: arch, NotifyConnect: true, NotifyMetadata: true})
			if got := v.runArch(t, c.audit, c.nr, unix.AF_UNIX, unix.SOCK_STREAM); got != kill {
				t.Errorf("%v filter, %s call (arch %#x nr %#x) = %s, want KILL_PROCESS", arch, abi, c.audit, c.nr, retName(got))
			}
		}
	}
	for goarch := range rows {
		if !slices.Contains([]plan.Arch{AMD64, ARM64}, plan.Arch(goarch)) {
			t.Errorf("the ledger has a row for %s, for which no filter is built", goarch)
		}
	}
}
