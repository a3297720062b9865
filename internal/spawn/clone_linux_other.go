//go:build linux && (!amd64 || race)

package spawn

import "syscall"

// Elsewhere the children are plain forks; also under the race detector,
// where VM-sharing children die of SIGSEGV before their first system call
// (not investigated further: the race build is for tests only).
const cloneShares = false

//go:nosplit
func cloneVM(flags, stack uintptr, p *Program, command bool, ptid uintptr) (r1, errno uintptr) {
	return 0, uintptr(syscall.ENOSYS)
}
