//go:build linux && !race

package spawn

// cloneShares says cloneVM exists here: the children share the launcher's
// memory instead of copying its page tables (and then faulting on every
// page either side writes, with a TLB shootdown across the launcher's
// threads each time), which is most of what a plain fork of a Go process
// costs.
const cloneShares = true

// cloneVM is implemented in clone_linux_amd64.s.
//
//go:noescape
func cloneVM(flags, stack uintptr, p *Program, command bool, ptid uintptr) (r1, errno uintptr)
