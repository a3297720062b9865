//go:build linux && !confine_simabi

package landlock

// simulatedABI is the identity in every build but the test-only
// confine_simabi one: a release binary always uses the kernel's own ABI.
func simulatedABI(kernel int) int { return kernel }

// Simulated reports whether this build can lower the Landlock ABI for tests.
const Simulated = false
