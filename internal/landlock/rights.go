package landlock

// The rights are plain data shared by the ABI feature table (which the
// guarantee ledger reads on every OS) and the Linux ruleset code.

import ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

// Filesystem rights by the ABI that introduced them.
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

	// fileRights are the rights the kernel accepts on a rule whose path is
	// not a directory; anything else there is EINVAL. RESOLVE_UNIX is left
	// out on purpose: we cannot test it on a file rule here, and dropping
	// it only narrows access.
	fileRights = ll.AccessFSExecute |
		ll.AccessFSWriteFile |
		ll.AccessFSReadFile |
		fsTruncate | fsIoctlDev

	readExecRights = ll.AccessFSExecute |
		ll.AccessFSReadFile |
		ll.AccessFSReadDir

	// deviceRights omit TRUNCATE: the kernel ignores O_TRUNC on
	// non-regular files, so "echo x > /dev/null" needs only WRITE_FILE.
	// noDeviceNodes are handled but never granted, even in ReadWrite:
	// a root command could otherwise mknod a disk's block device in its
	// worktree and open it there, outside every other rule.
	noDeviceNodes = ll.AccessFSMakeChar | ll.AccessFSMakeBlock

	deviceRights = ll.AccessFSReadFile |
		ll.AccessFSWriteFile | fsIoctlDev

	netTCP = ll.AccessNetBindTCP | ll.AccessNetConnectTCP

	scopeAll = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
)
