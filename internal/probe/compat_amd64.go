//go:build linux

// The i386 (INT $0x80) and x32 probes. Both run in a re-executed child of
// the probe (see runIsolated and the package comment): when a
// seccomp filter kills or traps the foreign-ABI call, the child dies of
// SIGSYS and the parent reports "blocked" with detail "killed by SIGSYS" or
// "crashed: SIGSYS: bad system call (seccomp trap)".

package probe

import (
	"encoding/binary"
	"fmt"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// int80 is implemented in probe_amd64.s.
func int80(trap, a1, a2, a3 uint32) (r uint32)

// i386 system call numbers and socketcall(2) sub-calls.
const (
	i386Socketcall = 102
	i386Socket     = 359
	i386Connect    = 362
	socketcallSock = 1 // SYS_SOCKET
	socketcallConn = 3 // SYS_CONNECT

	x32SyscallBit = 0x40000000
)

// i386Result interprets eax as a compat system call result.
func i386Result(r uint32) (int, error) {
	if v := int32(r); v < 0 && v > -4096 {
		return 0, unix.Errno(-v)
	}
	return int(r), nil
}

// vSocketcall32 creates an AF_INET socket through the i386 ABI, first with
// socketcall(SYS_SOCKET), then with the direct socket(2) of i386, and tries
// to connect it to 127.0.0.1:PORT. Creating the socket at all is the escape
// (a seccomp filter that only knows the x86_64 ABI lets it through); the
// connection is reported in the detail. Runs isolated: a seccomp filter that
// kills on a foreign architecture kills the child with SIGSYS.
func vSocketcall32(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	mem, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_32BIT)
	if err != nil {
		return blocked("mmap(MAP_32BIT)", err)
	}
	defer unix.Munmap(mem)
	base := uintptr(unsafe.Pointer(&mem[0]))
	if uint64(base)+uint64(len(mem)) > 1<<32 {
		return blockedf("mmap(MAP_32BIT) returned %#x, above 4 GiB", base)
	}
	ne := binary.NativeEndian
	// mem[0:12]: socketcall args of SYS_SOCKET; mem[64:76]: of SYS_CONNECT;
	// mem[128:144]: struct sockaddr_in for 127.0.0.1:port.
	ne.PutUint32(mem[0:], unix.AF_INET)
	ne.PutUint32(mem[4:], unix.SOCK_STREAM)
	ne.PutUint32(mem[8:], 0)
	ne.PutUint16(mem[128:], unix.AF_INET)
	mem[130], mem[131] = byte(port>>8), byte(port)
	copy(mem[132:136], loopback4[:])
	sockaddr := uint32(base) + 128

	var notes []string
	connectAndWrite := func(fd int, connect func() (int, error)) string {
		if _, err := connect(); err != nil {
			return "connect: " + errString(err)
		}
		if n, err := unix.Write(fd, []byte{'x'}); err != nil || n != 1 {
			return fmt.Sprintf("connected, write failed: %v", err)
		}
		return fmt.Sprintf("connected to 127.0.0.1:%d and wrote 1 byte", port)
	}

	progress("%s", gateMarker)
	fd, err := i386Result(int80(i386Socketcall, socketcallSock, uint32(base), 0))
	if err == nil {
		defer unix.Close(fd)
		ne.PutUint32(mem[64:], uint32(fd))
		ne.PutUint32(mem[68:], sockaddr)
		ne.PutUint32(mem[72:], 16)
		c := connectAndWrite(fd, func() (int, error) {
			return i386Result(int80(i386Socketcall, socketcallConn, uint32(base)+64, 0))
		})
		return escaped("i386 socketcall(SYS_SOCKET) returned fd %d; socketcall(SYS_CONNECT): %s", fd, c)
	}
	notes = append(notes, "i386 socketcall(SYS_SOCKET): "+errString(err))

	fd, err = i386Result(int80(i386Socket, unix.AF_INET, unix.SOCK_STREAM, 0))
	if err == nil {
		defer unix.Close(fd)
		c := connectAndWrite(fd, func() (int, error) {
			return i386Result(int80(i386Connect, uint32(fd), sockaddr, 16))
		})
		return escaped("%s; i386 socket(2) returned fd %d; connect(2): %s", notes[0], fd, c)
	}
	notes = append(notes, "i386 socket(2): "+errString(err))
	return blockedf("%s", strings.Join(notes, "; "))
}

// vX32Syscall calls socket(2) through the x32 ABI (nr | 0x40000000). Runs
// isolated, like vSocketcall32.
func vX32Syscall(args []string) result {
	port := 0
	if len(args) > 0 {
		var bad *result
		if port, bad = parsePort(args[0]); bad != nil {
			return *bad
		}
	}
	fd, _, e := unix.RawSyscall(x32SyscallBit|unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if e == unix.ENOSYS {
		return na("x32 socket: %s (x32 ABI not enabled)", errString(e))
	}
	if e != 0 {
		return blocked("x32 socket", e)
	}
	defer unix.Close(int(fd))
	if port == 0 {
		return escaped("x32 socket(2) returned fd %d", fd)
	}
	var sa unix.RawSockaddrInet4
	sa.Family = unix.AF_INET
	pb := (*[2]byte)(unsafe.Pointer(&sa.Port))
	pb[0], pb[1] = byte(port>>8), byte(port)
	sa.Addr = loopback4
	_, _, e = unix.RawSyscall(x32SyscallBit|unix.SYS_CONNECT, fd, uintptr(unsafe.Pointer(&sa)), unsafe.Sizeof(sa))
	if e != 0 {
		return escaped("x32 socket(2) returned fd %d; x32 connect: %s", fd, errString(e))
	}
	if n, err := unix.Write(int(fd), []byte{'x'}); err != nil || n != 1 {
		return escaped("x32 socket(2) returned fd %d; connected; write failed: %v", fd, err)
	}
	return escaped("x32 socket(2) returned fd %d; connected to 127.0.0.1:%d and wrote 1 byte", fd, port)
}
