//go:build linux

package seccomp

import "golang.org/x/sys/unix"

// inetSocket are the rules of socket() put before the AF_UNIX ones under
// plan.Seccomp.NotifyInet: TCP sockets of AF_INET and AF_INET6 go to the
// supervisor, which creates the descriptor itself; other internet sockets
// are refused here (UDP, so DNS, raw and ICMP: only TCP reaches the proxy;
// of the protocols, 0 or IPPROTO_TCP, not MPTCP (262), SCTP or others), and
// every other family goes on to the AF_UNIX rules.
func inetSocket() []argRule {
	inet := is(sockDomain, namedAFInet, namedAFInet6)
	return []argRule{
		when(errno(unix.EACCES), inet, isNot(sockType, namedStream)),
		when(errno(unix.EPROTONOSUPPORT), inet, isNot(sockProtocol, num(0), named{ipprotoTCP, "IPPROTO_TCP"})),
		when(unix.SECCOMP_RET_USER_NOTIF, inet),
	}
}

// reportInetSocket is the rule of socket() put before the AF_UNIX ones
// under plan.Seccomp.ReportInet (network = "deny-all"): every socket of AF_INET
// or AF_INET6 goes to the supervisor, which refuses it (EAFNOSUPPORT, as
// this filter does for every other family) and records the denial, so
// that a run says it was refused the network. Nothing is created either
// way.
func reportInetSocket() []argRule {
	return []argRule{when(unix.SECCOMP_RET_USER_NOTIF, is(sockDomain, namedAFInet, namedAFInet6)).
		noting("refused by the supervisor with EAFNOSUPPORT, and recorded")}
}
