package landlock

// The rights are plain data shared by the ABI feature table (which the
// guarantee ledger reads on every OS) and the Linux ruleset code.

import ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

// Rights by the ABI that introduced them.
const (
	// fsV1 is every right of ABI 1: EXECUTE .. MAKE_SYM.
	fsV1 = ll.AccessFSExecute |
		ll.AccessFSWriteFile |
		ll.AccessFSReadFile |
		ll.AccessFSReadDir |
		ll.AccessFSRemoveDir |
		ll.AccessFSRemoveFile |
		ll.AccessFSMakeChar |
		ll.AccessFSMakeDir |
		ll.AccessFSMakeReg |
		ll.AccessFSMakeSock |
		ll.AccessFSMakeFifo |
		ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym
	fsRefer       = ll.AccessFSRefer       // ABI 2
	fsTruncate    = ll.AccessFSTruncate    // ABI 3
	fsIoctlDev    = ll.AccessFSIoctlDev    // ABI 5
	fsResolveUnix = ll.AccessFSResolveUnix // ABI 9

	netTCP = ll.AccessNetBindTCP | ll.AccessNetConnectTCP

	scopeAll = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
)
