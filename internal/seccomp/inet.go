//go:build linux

package seccomp

import (
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// inetSocket wraps the AF_UNIX socket block for Config.NotifyInet: TCP
// sockets of AF_INET and AF_INET6 go to the supervisor, which creates the
// descriptor itself; other internet sockets are refused here, and every
// other family goes on to unix (which refuses all but AF_UNIX).
func inetSocket(unixBlock func(a *assembler, cfg Config)) func(a *assembler, cfg Config) {
	return func(a *assembler, cfg Config) {
		inet, other := a.newLabel(), a.newLabel()
		a.loadWord(argLow(0))
		a.jumpIf(bpf.JumpEqual, afInet, inet, next)
		a.jumpIf(bpf.JumpEqual, afInet6, inet, other)
		a.mark(inet)
		// UDP (so DNS), raw and ICMP sockets stay refused: only TCP
		// reaches the proxy.
		proto := a.newLabel()
		a.loadWord(argLow(1))
		a.insn(bpf.ALUOpConstant{Op: bpf.ALUOpAnd, Val: sockTypeMask})
		a.jumpIf(bpf.JumpEqual, sockStream, proto, a.ret(errno(unix.EACCES)))
		a.mark(proto)
		// Protocol 0 or IPPROTO_TCP; not MPTCP (262), SCTP or others.
		notify := a.ret(unix.SECCOMP_RET_USER_NOTIF)
		a.loadWord(argLow(2))
		a.jumpIf(bpf.JumpEqual, 0, notify, next)
		a.jumpIf(bpf.JumpEqual, ipprotoTCP, notify, a.ret(errno(unix.EPROTONOSUPPORT)))
		a.mark(other)
		unixBlock(a, cfg)
	}
}

// reportInetSocket wraps the AF_UNIX socket block for Config.ReportInet
// (network = "deny-all"): every socket of AF_INET or AF_INET6 goes to the
// supervisor, which refuses it (EAFNOSUPPORT, as this filter does for
// every other family) and records the denial, so that a run says it was
// refused the network. Nothing is created either way.
func reportInetSocket(unixBlock func(a *assembler, cfg Config)) func(a *assembler, cfg Config) {
	return func(a *assembler, cfg Config) {
		notify, other := a.ret(unix.SECCOMP_RET_USER_NOTIF), a.newLabel()
		a.loadWord(argLow(0))
		a.jumpIf(bpf.JumpEqual, afInet, notify, next)
		a.jumpIf(bpf.JumpEqual, afInet6, notify, other)
		a.mark(other)
		unixBlock(a, cfg)
	}
}

func reportInetSocketDoc(unixDoc []Rule) []Rule {
	return append([]Rule{
		{When: "domain is AF_INET or AF_INET6 (refused by the supervisor with EAFNOSUPPORT, and recorded)", Notify: true},
	}, unixDoc...)
}

func inetSocketDoc(unixDoc []Rule) []Rule {
	return append([]Rule{
		{When: "domain is AF_INET or AF_INET6 and (type & 0xf) != SOCK_STREAM", Errno: unix.EACCES},
		{When: "domain is AF_INET or AF_INET6, SOCK_STREAM, protocol not 0 or IPPROTO_TCP", Errno: unix.EPROTONOSUPPORT},
		{When: "domain is AF_INET or AF_INET6, SOCK_STREAM, protocol 0 or IPPROTO_TCP", Notify: true},
	}, unixDoc...)
}
