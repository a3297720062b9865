package probe

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// vCapabilities looks for privilege the process holds or can regain: any
// capability in its effective, permitted, inheritable or ambient set, or a
// non-empty bounding set without no_new_privs (executing a set-user-ID or
// file-capability binary would then grant capabilities). Either is the
// escape; the detail lists what was found. It asks the kernel directly
// (capget, prctl), since /proc/self/status may be unreadable in a sandbox.
func vCapabilities([]string) result {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return blocked("capget", err)
	}
	join := func(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }
	sets := []struct {
		name string
		v    uint64
	}{
		{"effective", join(data[0].Effective, data[1].Effective)},
		{"permitted", join(data[0].Permitted, data[1].Permitted)},
		{"inheritable", join(data[0].Inheritable, data[1].Inheritable)},
	}
	var held []string
	for _, s := range sets {
		if s.v != 0 {
			held = append(held, fmt.Sprintf("%s=%x", s.name, s.v))
		}
	}
	var ambient, bounding uint64
	for c := 0; c < 64; c++ {
		if r, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && r == 1 {
			ambient |= 1 << c
		}
		if r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && r == 1 {
			bounding |= 1 << c
		}
	}
	if ambient != 0 {
		held = append(held, fmt.Sprintf("ambient=%x", ambient))
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return blocked("prctl(PR_GET_NO_NEW_PRIVS)", err)
	}
	if bounding != 0 && nnp == 0 {
		held = append(held, fmt.Sprintf("bounding=%x with no_new_privs off (a set-user-ID exec regains them)", bounding))
	}
	if len(held) > 0 {
		return escaped("holds %s", strings.Join(held, ", "))
	}
	return blockedf("no capability held or regainable (bounding=%x, no_new_privs=%d)", bounding, nnp)
}
