//go:build linux && confine_simabi

package landlock

import (
	"os"
	"strconv"
)

// SimEnv names the variable that, in a binary built with -tags
// confine_simabi and only there, lowers the Landlock ABI confine sees to
// min(kernel, N). Rulesets then handle only that ABI's rights, and every
// decision keyed on the ABI (guarantees, notifications) follows, so the
// ABIs no bootable kernel offers (1, 3, 4, 5) are tested on a new host.
const SimEnv = "CONFINE_SIM_LANDLOCK_ABI"

// Simulated reports whether this build can lower the Landlock ABI for tests.
const Simulated = true

func simulatedABI(kernel int) int {
	n, err := strconv.Atoi(os.Getenv(SimEnv))
	if err != nil || n < 1 || n >= kernel {
		return kernel
	}
	return n
}
