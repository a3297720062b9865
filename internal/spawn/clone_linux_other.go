//go:build linux && (!amd64 || race)

package spawn

import "syscall"

// Elsewhere (and under the race detector, whose instrumented runtime the
// children must not enter) the children are plain forks.
const cloneShares = false

//go:nosplit
func cloneVM(flags, stack uintptr, p *Program, command bool) (r1, errno uintptr) {
	return 0, uintptr(syscall.ENOSYS)
}
