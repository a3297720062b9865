//go:build linux

package seccomp

import "testing"

// The hand-written arm64 numbers must agree with x/sys/unix, which is
// generated from the kernel headers for this GOARCH. arm64 has no call of
// its own there: only the shared ones.
func TestNumbersMatchUnix(t *testing.T) {
	checkTable(t, "arm64Nr", arm64Nr, sharedWant)
	checkTable(t, "commonARM64", commonARM64, sharedCommonWant)
}
