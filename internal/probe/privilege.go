//go:build linux

package probe

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// vPrivilege looks for privilege the process holds or can gain: any
// capability in its effective, permitted, inheritable or ambient set, or
// no no_new_privs (executing a set-user-ID program or one with file
// capabilities would then raise it, whatever the bounding set: a
// set-user-ID root program still gives uid 0). A bounding set left
// non-empty under no_new_privs grants nothing (no execve can raise
// capabilities then, and a new user namespace starts with a full set of its
// own anyway): it is reported, not counted. The unconfined control has
// no_new_privs off. It asks the kernel (capget, prctl) rather than
// /proc/self/status, which a sandbox may make unreadable: a question the
// kernel does not answer is an error, never "blocked".
func vPrivilege([]string) result {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return usage("cannot observe the capability sets: capget: %s", errString(err))
	}
	join := func(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }
	var held []string
	for _, s := range []struct {
		name string
		v    uint64
	}{
		{"CapEff", join(data[0].Effective, data[1].Effective)},
		{"CapPrm", join(data[0].Permitted, data[1].Permitted)},
		{"CapInh", join(data[0].Inheritable, data[1].Inheritable)},
	} {
		if s.v != 0 {
			held = append(held, fmt.Sprintf("%s=%x", s.name, s.v))
		}
	}
	// The bounding and ambient sets, one capability at a time, up to the
	// first number the kernel does not know (EINVAL).
	var bounding, ambient uint64
	for c := 0; c < 64; c++ {
		r, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err == unix.EINVAL {
			break
		}
		if err != nil {
			return usage("cannot observe the bounding set: prctl(PR_CAPBSET_READ, %d): %s", c, errString(err))
		}
		if r == 1 {
			bounding |= 1 << c
		}
		if r, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && r == 1 {
			ambient |= 1 << c
		}
	}
	if ambient != 0 {
		held = append(held, fmt.Sprintf("CapAmb=%x", ambient))
	}
	nnp, err := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0)
	if err != nil {
		return usage("cannot observe no_new_privs: %s", errString(err))
	}
	if nnp != 1 {
		held = append(held, fmt.Sprintf("NoNewPrivs=%d", nnp))
	}
	bnd := fmt.Sprintf("CapBnd=%x", bounding)
	if len(held) > 0 {
		return escaped("privilege held or gainable: %s (%s)", strings.Join(held, " "), bnd)
	}
	if bounding != 0 {
		return blockedf("no capability in the effective, permitted, inheritable or ambient set, no_new_privs set (%s left, which no_new_privs keeps from granting anything)", bnd)
	}
	return blockedf("no capability in any set, no_new_privs set")
}
