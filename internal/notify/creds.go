//go:build linux

package notify

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// creds are the credentials of a notifying task that matter for file
// permission checks and for the peer credentials of a unix-socket connection.
type creds struct {
	euid, fsuid uint32
	egid, fsgid uint32
	groups      []uint32
}

// inGroup reports whether gid is the task's fsgid or a supplementary group,
// the set the kernel's in_group_p() consults.
func (c *creds) inGroup(gid uint32) bool {
	return gid == c.fsgid || slices.Contains(c.groups, gid)
}

// threadCreds switches the credentials of the calling OS thread to those of a
// notifying task and back. Linux credentials are per thread, and the raw
// set*id system calls used here (unlike syscall.Setresuid, which Go applies to
// every thread of the process) change only the calling thread; the caller must
// therefore hold the thread with runtime.LockOSThread for the whole lifetime of
// a threadCreds and must let the thread die (exit the goroutine while still
// locked) once poisoned is set.
//
// Why switch at all: the supervisor is usually root. Performing an operation
// for the child with root's credentials would let the child walk directories
// it cannot search, keep S_ISGID bits the kernel would strip, or present
// itself to a unix-socket server as uid 0 (SO_PEERCRED is taken from the
// connecting thread). With the child's effective ids, groups and an empty
// effective capability set, the kernel applies to the supervisor exactly the
// discretionary checks it would have applied to the child.
//
// Changing the effective ids of any thread makes the kernel clear the
// process's dumpable flag (no core dumps, /proc/<pid> owned by root); for a
// root supervisor that is harmless.
type threadCreds struct {
	canSwitch bool // CAP_SETUID and CAP_SETGID are effective
	euid      uint32
	fsuid     uint32
	egid      uint32
	fsgid     uint32
	groups    []uint32
	caps      [2]unix.CapUserData

	switched bool // ids or groups may differ from the saved ones
	poisoned bool // restoring failed: the thread must not be reused
}

const (
	capSetgid = 6
	capSetuid = 7
)

// newThreadCreds records the calling thread's credentials.
func newThreadCreds() (*threadCreds, error) {
	tc := &threadCreds{}
	if err := capget(&tc.caps); err != nil {
		return nil, fmt.Errorf("capget: %w", err)
	}
	_, tc.euid, _ = getresuid()
	_, tc.egid, _ = getresgid()
	tc.fsuid = getfsuid()
	tc.fsgid = getfsgid()
	g, err := getgroups()
	if err != nil {
		return nil, fmt.Errorf("getgroups: %w", err)
	}
	tc.groups = g
	eff := tc.caps[0].Effective
	tc.canSwitch = eff&(1<<capSetuid) != 0 && eff&(1<<capSetgid) != 0
	return tc, nil
}

var errCredMismatch = errors.New("notify: supervisor cannot assume the task's credentials")

// become gives the calling thread the credentials c and no effective
// capabilities. After any call, successful or not, restore must be called.
func (tc *threadCreds) become(c *creds) error {
	if !tc.canSwitch {
		// An unprivileged supervisor can act only for a task whose ids are
		// its own (the usual case: the child inherited them).
		if c.euid != tc.euid || c.fsuid != tc.fsuid || c.egid != tc.egid ||
			c.fsgid != tc.fsgid || !sameGroups(c.groups, tc.groups) {
			return errCredMismatch
		}
	} else if c.euid != tc.euid || c.fsuid != tc.fsuid || c.egid != tc.egid ||
		c.fsgid != tc.fsgid || !sameGroups(c.groups, tc.groups) {
		// (Ids equal to the thread's own, which restore verified last
		// time, need no switch: a root supervisor serving a root task.)
		tc.switched = true
		if !sameGroups(c.groups, tc.groups) {
			if err := setgroups(c.groups); err != nil {
				return err
			}
		}
		// Only the effective (and with it the filesystem) ids change: real
		// and saved ids stay, so that restore may switch back without
		// privilege, and the permitted capability set survives.
		if err := setresgid(-1, int(c.egid), -1); err != nil {
			return err
		}
		if c.fsgid != c.egid {
			setfsgid(int(c.fsgid))
		}
		if err := setresuid(-1, int(c.euid), -1); err != nil {
			return err
		}
		if c.fsuid != c.euid {
			setfsuid(int(c.fsuid))
		}
		if _, e, _ := getresuid(); e != c.euid || getfsuid() != c.fsuid {
			return errCredMismatch
		}
		if _, e, _ := getresgid(); e != c.egid || getfsgid() != c.fsgid {
			return errCredMismatch
		}
	}
	// The confined command holds no capabilities, whatever its uid: a
	// uid-0 child must not be granted CAP_DAC_OVERRIDE, CAP_FOWNER, ...
	drop := tc.caps
	drop[0].Effective, drop[1].Effective = 0, 0
	return capset(&drop)
}

// restore returns the thread to its recorded credentials and verifies it. On
// failure it sets poisoned.
func (tc *threadCreds) restore() {
	if !tc.switched {
		// become changed the capabilities only (the ids were the
		// task's already): nothing else on this thread changes ids, so
		// the capabilities are all there is to restore and check (a
		// capset and a capget instead of seven calls).
		var caps [2]unix.CapUserData
		if capset(&tc.caps) != nil || capget(&caps) != nil || caps != tc.caps {
			tc.poisoned = true
		}
		return
	}
	// Back to the saved euid first: for root this also refills the
	// effective capability set, which the remaining calls need.
	_ = setresuid(-1, int(tc.euid), -1)
	if tc.fsuid != tc.euid {
		setfsuid(int(tc.fsuid))
	}
	_ = capset(&tc.caps)
	_ = setresgid(-1, int(tc.egid), -1)
	if tc.fsgid != tc.egid {
		setfsgid(int(tc.fsgid))
	}
	if g, err := getgroups(); err != nil || !sameGroups(g, tc.groups) {
		_ = setgroups(tc.groups)
	}
	tc.switched = false
	if !tc.verify() {
		tc.poisoned = true
	}
}

func (tc *threadCreds) verify() bool {
	var caps [2]unix.CapUserData
	if capget(&caps) != nil || caps != tc.caps {
		return false
	}
	if _, e, _ := getresuid(); e != tc.euid || getfsuid() != tc.fsuid {
		return false
	}
	if _, e, _ := getresgid(); e != tc.egid || getfsgid() != tc.fsgid {
		return false
	}
	g, err := getgroups()
	return err == nil && sameGroups(g, tc.groups)
}

func sameGroups(a, b []uint32) bool {
	if len(a) != len(b) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// The helpers below issue the system calls directly so that they affect the
// calling thread only.

func capget(d *[2]unix.CapUserData) error {
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	_, _, e := unix.RawSyscall(unix.SYS_CAPGET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0)
	return errnoErr(e)
}

func capset(d *[2]unix.CapUserData) error {
	h := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	_, _, e := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(&d[0])), 0)
	return errnoErr(e)
}

func setresuid(r, e, s int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(r), uintptr(e), uintptr(s))
	return errnoErr(errno)
}

func setresgid(r, e, s int) error {
	_, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(r), uintptr(e), uintptr(s))
	return errnoErr(errno)
}

func getresuid() (r, e, s uint32) {
	unix.RawSyscall(unix.SYS_GETRESUID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s)))
	return
}

func getresgid() (r, e, s uint32) {
	unix.RawSyscall(unix.SYS_GETRESGID, uintptr(unsafe.Pointer(&r)), uintptr(unsafe.Pointer(&e)), uintptr(unsafe.Pointer(&s)))
	return
}

// setfsuid and setfsgid return the previous value and never fail; callers
// verify the outcome with getfsuid/getfsgid.
func setfsuid(id int) {
	unix.RawSyscall(unix.SYS_SETFSUID, uintptr(id), 0, 0)
}

func setfsgid(id int) {
	unix.RawSyscall(unix.SYS_SETFSGID, uintptr(id), 0, 0)
}

// getfsuid relies on setfsuid(-1) being rejected as an invalid id and
// returning the current value unchanged.
func getfsuid() uint32 {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSUID, ^uintptr(0), 0, 0)
	return uint32(r)
}

func getfsgid() uint32 {
	r, _, _ := unix.RawSyscall(unix.SYS_SETFSGID, ^uintptr(0), 0, 0)
	return uint32(r)
}

func getgroups() ([]uint32, error) {
	n, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return nil, e
	}
	if n == 0 {
		return []uint32{}, nil
	}
	g := make([]uint32, n)
	m, _, e := unix.RawSyscall(unix.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&g[0])), 0)
	if e != 0 {
		return nil, e
	}
	return g[:m], nil
}

func setgroups(g []uint32) error {
	var p unsafe.Pointer
	if len(g) > 0 {
		p = unsafe.Pointer(&g[0])
	}
	_, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(g)), uintptr(p), 0)
	return errnoErr(e)
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
