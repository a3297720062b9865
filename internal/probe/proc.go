//go:build linux

package probe

import (
	"runtime"

	"golang.org/x/sys/unix"
)

func vKill(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	if err := unix.Kill(pid, unix.SIGUSR1); err != nil {
		return blocked("kill(SIGUSR1)", err)
	}
	return escaped("kill(%d, SIGUSR1) succeeded", pid)
}

// vPtrace attaches to PID, waits for the attach stop and detaches again
// (the SIGSTOP of the attach is suppressed, so the tracee just continues).
func vPtrace(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	// ptrace requests must come from the thread that attached.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceAttach(pid); err != nil {
		return blocked("PTRACE_ATTACH", err)
	}
	var ws unix.WaitStatus
	for {
		_, err := unix.Wait4(pid, &ws, unix.WALL, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return escaped("PTRACE_ATTACH to %d succeeded (wait4: %s)", pid, errString(err))
		}
		break
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return escaped("PTRACE_ATTACH to %d succeeded (detach: %s)", pid, errString(err))
	}
	return escaped("PTRACE_ATTACH to %d succeeded (stopped: %v, detached)", pid, ws.Stopped())
}

func vProcessVMReadv(args []string) result {
	pid, bad := parsePid(args[0])
	if bad != nil {
		return *bad
	}
	addr, bad := parseHex(args[1])
	if bad != nil {
		return *bad
	}
	buf := make([]byte, 8)
	n, err := unix.ProcessVMReadv(pid,
		[]unix.Iovec{{Base: &buf[0], Len: uint64(len(buf))}},
		[]unix.RemoteIovec{{Base: uintptr(addr), Len: len(buf)}}, 0)
	if err != nil {
		return blocked("process_vm_readv", err)
	}
	if n <= 0 {
		return blockedf("process_vm_readv read %d bytes", n)
	}
	return escaped("process_vm_readv read %d bytes at %#x of pid %d: %x", n, addr, pid, buf[:n])
}

// vProcRead reads a /proc file of another process (or any file); with
// ADDRHEX it preads there, for /proc/PID/mem.
func vProcRead(args []string) result {
	path := args[0]
	var off uint64
	if len(args) > 1 {
		var bad *result
		if off, bad = parseHex(args[1]); bad != nil {
			return *bad
		}
		if off > 1<<63-1 {
			return usage("address %q too large for an offset", args[1])
		}
	}
	fd, err := openRetry(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return blocked("open "+path, err)
	}
	defer unix.Close(fd)
	buf := make([]byte, 4096)
	var n int
	if len(args) > 1 {
		n, err = unix.Pread(fd, buf[:8], int64(off))
	} else {
		n, err = unix.Read(fd, buf)
	}
	if err != nil {
		return blocked("read "+path, err)
	}
	if n <= 0 {
		return blockedf("read %s: 0 bytes", path)
	}
	return escaped("read %d bytes of %s", n, path)
}
