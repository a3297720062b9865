package denials

import (
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

// Each rule of denialHints names its fix, and a denial no rule covers
// gets none.
func TestDenialHints(t *testing.T) {
	for _, c := range []struct {
		d    spec.Denial
		want string
	}{
		{spec.Denial{Syscall: "socket", Path: "AF_INET", Errno: "EAFNOSUPPORT", Reason: "the profile denies the network"}, `a profile with network = "allowlist" and the hosts it may reach in [allowlist] (docs/network.md)`},
		{spec.Denial{Syscall: "socket", Path: "AF_INET6", Errno: "EAFNOSUPPORT"}, `a profile with network = "allowlist" and the hosts it may reach in [allowlist] (docs/network.md)`},
		{spec.Denial{Syscall: "fchmodat", Path: "/srv/other/f", Errno: "EACCES", Reason: "target outside the writable roots"}, "--rw /srv/other"},
		{spec.Denial{Syscall: "truncate", Path: "/etc/passwd", Errno: "EACCES", Reason: "truncate outside the writable roots"}, "--rw /etc"},
		{spec.Denial{Syscall: "fchmodat", Path: "/w/f", Errno: "EPERM", Reason: "set-user-ID bit"}, ""},
		{spec.Denial{Syscall: "socket", Path: "AF_NETLINK", Errno: "EAFNOSUPPORT"}, ""},
		{spec.Denial{Syscall: "fchmodat", Path: "rel", Errno: "EACCES", Reason: "target outside the writable roots"}, ""},
		{spec.Denial{Syscall: "execve", Path: "/opt/x", Errno: "ENOENT", Hint: "--ro /opt"}, "--ro /opt"},
	} {
		ds := []spec.Denial{c.d}
		Hint(ds)
		if ds[0].Hint != c.want {
			t.Errorf("%+v: hint %q, want %q", c.d, ds[0].Hint, c.want)
		}
	}
}

// The messages of sh, coreutils and Python name the path and the errno.
func TestRefusalsIn(t *testing.T) {
	for _, c := range []struct {
		text string
		want []seenRefusal
	}{
		{"sh: 1: cannot create /srv/other/outside.txt: Read-only file system\n", []seenRefusal{{"/srv/other/outside.txt", "EROFS"}}},
		{"touch: cannot touch '/srv/other/a': Permission denied\n", []seenRefusal{{"/srv/other/a", "EACCES"}}},
		{"cat: /srv/data/x.txt: No such file or directory\n", []seenRefusal{{"/srv/data/x.txt", "ENOENT"}}},
		{"sh: 1: cannot create /srv/other/o.txt: Directory nonexistent\n", []seenRefusal{{"/srv/other/o.txt", "ENOENT"}}},
		{"OSError: [Errno 30] Read-only file system: '/srv/other/p y'\n", []seenRefusal{{"/srv/other/p y", "EROFS"}}},
		{"PermissionError: [Errno 13] Permission denied: '/opt/x'\n", []seenRefusal{{"/opt/x", "EACCES"}}},
		{"a: /x/../y: Permission denied\nb: /y: Permission denied\n", []seenRefusal{{"/y", "EACCES"}}},
		{"relative: Permission denied\nno path here\n", nil},
	} {
		got := refusalsIn(c.text)
		if len(got) != len(c.want) {
			t.Errorf("%q: %v, want %v", c.text, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%q: %v, want %v", c.text, got, c.want)
			}
		}
	}
}
