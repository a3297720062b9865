//go:build linux

package seccomp

import (
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// TestNotifyInet: with the allowlist, TCP sockets of both internet
// families go to the supervisor; UDP, raw, MPTCP and every other family
// stay refused, and socketpair stays AF_UNIX only. High argument words
// change nothing.
func TestNotifyInet(t *testing.T) {
	for _, arch := range arches {
		v := newVM(t, plan.Seccomp{Arch: arch, NotifyInet: true, NotifyConnect: true})
		sock, pair := v.nr(t, "socket"), v.nr(t, "socketpair")
		for _, c := range []struct {
			nr   uint32
			args []uint64
			want uint32
		}{
			{sock, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, notif},
			{sock, []uint64{unix.AF_INET6, unix.SOCK_STREAM | unix.SOCK_NONBLOCK | unix.SOCK_CLOEXEC, unix.IPPROTO_TCP}, notif},
			{sock, []uint64{unix.AF_INET | hi, unix.SOCK_STREAM | hi, hi}, notif},
			{sock, []uint64{unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP}, eprotonosupport},
			{sock, []uint64{unix.AF_INET6, unix.SOCK_STREAM, unix.IPPROTO_SCTP}, eprotonosupport},
			{sock, []uint64{unix.AF_INET, unix.SOCK_DGRAM, 0}, eacces},
			{sock, []uint64{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP}, eacces},
			{sock, []uint64{unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP}, eacces},
			{sock, []uint64{unix.AF_INET, unix.SOCK_SEQPACKET, 0}, eacces},
			{sock, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, eafnosupport},
			{sock, []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, eafnosupport},
			{sock, []uint64{unix.AF_VSOCK, unix.SOCK_STREAM, 0}, eafnosupport},
			{sock, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
			{sock, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, eacces},
			{pair, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, eafnosupport},
			{pair, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
		} {
			if got := v.run(t, c.nr, c.args...); got != c.want {
				t.Errorf("%v nr %d(%#x) = %s, want %s", arch, c.nr, c.args, retName(got), retName(c.want))
			}
		}
	}
}

// TestReportInet: under deny-all with ReportInet, every socket of both
// internet families goes to the supervisor (which refuses it); every
// other family and socketpair keep the filter's answers.
func TestReportInet(t *testing.T) {
	for _, arch := range arches {
		for _, report := range []bool{false, true} {
			v := newVM(t, plan.Seccomp{Arch: arch, ReportInet: report, NotifyConnect: true})
			sock, pair := v.nr(t, "socket"), v.nr(t, "socketpair")
			inet := uint32(eafnosupport)
			if report {
				inet = notif
			}
			for _, c := range []struct {
				nr   uint32
				args []uint64
				want uint32
			}{
				{sock, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, inet},
				{sock, []uint64{unix.AF_INET6, unix.SOCK_DGRAM, unix.IPPROTO_UDP}, inet},
				{sock, []uint64{unix.AF_INET | hi, unix.SOCK_RAW | hi, unix.IPPROTO_ICMP}, inet},
				{sock, []uint64{unix.AF_NETLINK, unix.SOCK_RAW, 0}, eafnosupport},
				{sock, []uint64{unix.AF_PACKET, unix.SOCK_RAW, 0}, eafnosupport},
				{sock, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
				{sock, []uint64{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, eacces},
				{pair, []uint64{unix.AF_INET, unix.SOCK_STREAM, 0}, eafnosupport},
				{pair, []uint64{unix.AF_UNIX, unix.SOCK_STREAM, 0}, allow},
			} {
				if got := v.run(t, c.nr, c.args...); got != c.want {
					t.Errorf("%v report=%v nr %d(%#x) = %s, want %s", arch, report, c.nr, c.args, retName(got), retName(c.want))
				}
			}
		}
	}
}
