package capture

import (
	"os"

	"golang.org/x/sys/unix"
)

// GrowPipe asks the kernel for a pipe buffer of n bytes on f (bigger pipes
// cut context switches on floods). It goes through SyscallConn rather than
// f.Fd(): Fd() switches the descriptor to blocking mode for good, and a
// goroutine blocked in read(2) is handed a new thread and P each time the
// pipe runs dry once the runtime's poller is running, as it is in the
// launcher; in a 1 GiB flood that tripled context switches and cost 10-20%
// of throughput. Errors are ignored: the default size still works.
func GrowPipe(f *os.File, n int) {
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, n) })
	}
}
