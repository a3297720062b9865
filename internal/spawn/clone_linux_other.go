//go:build linux && !amd64

package spawn

import "syscall"

// Elsewhere the children are plain forks.
const cloneShares = false

//go:nosplit
func cloneVM(flags, stack uintptr, p *Program, command bool) (r1, errno uintptr) {
	return 0, uintptr(syscall.ENOSYS)
}
