//go:build linux

package probe

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A minimal io_uring: one ring, one request in flight at a time, driven by
// raw io_uring_setup/io_uring_enter and mmap of the rings. Requests carry
// pointers to Go memory; the Go heap does not move objects, and every such
// buffer is kept alive until its completion has been read.

// io_uring opcodes (enum io_uring_op).
const (
	uringOpConnect = 16
	uringOpOpenat  = 18
	uringOpRead    = 22
	uringOpSend    = 26
	uringOpSocket  = 45
)

const (
	uringOffSQRing       = 0
	uringOffCQRing       = 0x8000000
	uringOffSQEs         = 0x10000000
	uringEnterGetEvents  = 1
	uringFeatSingleMmap  = 1
	uringSQESize         = 64
	uringCQESize         = 16
	uringDefaultEntries  = 4
	uringDisabledSysctl  = "/proc/sys/kernel/io_uring_disabled"
	uringSysctlDirectory = "/proc/sys/kernel"
)

type uringSQOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type uringCQOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

// uringParams is struct io_uring_params (120 bytes).
type uringParams struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFD uint32
	resv                                                                   [3]uint32
	sqOff                                                                  uringSQOffsets
	cqOff                                                                  uringCQOffsets
}

// uringSQE is struct io_uring_sqe (64 bytes).
type uringSQE struct {
	opcode      uint8
	flags       uint8
	ioprio      uint16
	fd          int32
	off         uint64
	addr        uint64
	len         uint32
	opFlags     uint32
	userData    uint64
	bufIndex    uint16
	personality uint16
	fileIndex   uint32
	addr3       uint64
	pad         uint64
}

// uringCQE is struct io_uring_cqe (16 bytes).
type uringCQE struct {
	userData uint64
	res      int32
	flags    uint32
}

type uring struct {
	fd     int
	p      uringParams
	sqRing []byte
	cqRing []byte
	sqes   []byte
}

// uringSetupError turns an io_uring_setup failure into a result.
func uringSetupError(err error) result {
	if b, rerr := os.ReadFile(uringDisabledSysctl); rerr == nil && strings.TrimSpace(string(b)) == "2" {
		return na("io_uring_setup: %s (kernel.io_uring_disabled=2)", errString(err))
	}
	if err == unix.ENOSYS {
		// Kernels with io_uring (>= 6.6) have the sysctl; if the sysctl
		// directory is readable but the sysctl is absent, io_uring is
		// compiled out.
		if _, derr := os.Stat(uringSysctlDirectory); derr == nil {
			if _, serr := os.Stat(uringDisabledSysctl); os.IsNotExist(serr) {
				return na("io_uring_setup: %s (kernel without io_uring)", errString(err))
			}
		}
	}
	return blocked("io_uring_setup", err)
}

// newUring sets up a ring; on failure it returns the result to report.
func newUring() (*uring, *result) {
	r := &uring{fd: -1}
	fd, _, e := unix.Syscall(unix.SYS_IO_URING_SETUP, uringDefaultEntries, uintptr(unsafe.Pointer(&r.p)), 0)
	if e != 0 {
		res := uringSetupError(e)
		return nil, &res
	}
	r.fd = int(fd)
	sqSize := int(r.p.sqOff.array + r.p.sqEntries*4)
	cqSize := int(r.p.cqOff.cqes + r.p.cqEntries*uringCQESize)
	const prot, flags = unix.PROT_READ | unix.PROT_WRITE, unix.MAP_SHARED | unix.MAP_POPULATE
	var err error
	if r.p.features&uringFeatSingleMmap != 0 {
		r.sqRing, err = unix.Mmap(r.fd, uringOffSQRing, max(sqSize, cqSize), prot, flags)
		r.cqRing = r.sqRing
	} else {
		r.sqRing, err = unix.Mmap(r.fd, uringOffSQRing, sqSize, prot, flags)
		if err == nil {
			r.cqRing, err = unix.Mmap(r.fd, uringOffCQRing, cqSize, prot, flags)
		}
	}
	if err == nil {
		r.sqes, err = unix.Mmap(r.fd, uringOffSQEs, int(r.p.sqEntries)*uringSQESize, prot, flags)
	}
	if err != nil {
		r.close()
		res := blocked("mmap io_uring rings", err)
		return nil, &res
	}
	return r, nil
}

func (r *uring) close() {
	if r.sqes != nil {
		_ = unix.Munmap(r.sqes)
	}
	if r.cqRing != nil && r.p.features&uringFeatSingleMmap == 0 {
		_ = unix.Munmap(r.cqRing)
	}
	if r.sqRing != nil {
		_ = unix.Munmap(r.sqRing)
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
	}
}

func ringU32(m []byte, off uint32) *uint32 {
	return (*uint32)(unsafe.Pointer(&m[off]))
}

// do submits one request and waits for its completion; it returns cqe.res.
// The caller keeps the memory that sqe points to alive until do returns.
func (r *uring) do(sqe uringSQE) (int32, error) {
	sqTail := ringU32(r.sqRing, r.p.sqOff.tail)
	sqMask := *ringU32(r.sqRing, r.p.sqOff.ringMask)
	tail := atomic.LoadUint32(sqTail)
	idx := tail & sqMask
	*(*uringSQE)(unsafe.Pointer(&r.sqes[idx*uringSQESize])) = sqe
	*ringU32(r.sqRing, r.p.sqOff.array+idx*4) = idx
	atomic.StoreUint32(sqTail, tail+1)

	toSubmit := uintptr(1)
	cqHead := ringU32(r.cqRing, r.p.cqOff.head)
	cqTail := ringU32(r.cqRing, r.p.cqOff.tail)
	cqMask := *ringU32(r.cqRing, r.p.cqOff.ringMask)
	for {
		head := atomic.LoadUint32(cqHead)
		if head != atomic.LoadUint32(cqTail) {
			cqe := *(*uringCQE)(unsafe.Pointer(&r.cqRing[r.p.cqOff.cqes+(head&cqMask)*uringCQESize]))
			atomic.StoreUint32(cqHead, head+1)
			return cqe.res, nil
		}
		n, _, e := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.fd), toSubmit, 1, uringEnterGetEvents, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		if toSubmit > 0 && n == 0 {
			return 0, fmt.Errorf("io_uring_enter submitted nothing")
		}
		toSubmit = 0
	}
}

// op runs one request and turns a negative result into an error.
func (r *uring) op(sqe uringSQE) (int32, error) {
	res, err := r.do(sqe)
	if err != nil {
		return 0, fmt.Errorf("io_uring_enter: %w", err)
	}
	if res < 0 {
		return 0, unix.Errno(-res)
	}
	return res, nil
}

func vIOUringSocket(args []string) result {
	port, bad := parsePort(args[0])
	if bad != nil {
		return *bad
	}
	r, fail := newUring()
	if fail != nil {
		return *fail
	}
	defer r.close()

	sfd, err := r.op(uringSQE{opcode: uringOpSocket, fd: unix.AF_INET, off: unix.SOCK_STREAM | unix.SOCK_CLOEXEC})
	if err != nil {
		return blocked("IORING_OP_SOCKET(AF_INET)", err)
	}
	defer unix.Close(int(sfd))

	var sa unix.RawSockaddrInet4
	sa.Family = unix.AF_INET
	pb := (*[2]byte)(unsafe.Pointer(&sa.Port))
	pb[0], pb[1] = byte(port>>8), byte(port)
	sa.Addr = loopback4
	_, err = r.op(uringSQE{opcode: uringOpConnect, fd: sfd, addr: uint64(uintptr(unsafe.Pointer(&sa))), off: uint64(unsafe.Sizeof(sa))})
	runtime.KeepAlive(&sa)
	if err != nil {
		return blocked(fmt.Sprintf("IORING_OP_CONNECT 127.0.0.1:%d", port), err)
	}

	b := []byte{'x'}
	n, err := r.op(uringSQE{opcode: uringOpSend, fd: sfd, addr: uint64(uintptr(unsafe.Pointer(&b[0]))), len: 1})
	runtime.KeepAlive(b)
	if err != nil {
		return blocked("IORING_OP_SEND", err)
	}
	if n != 1 {
		return blockedf("IORING_OP_SEND: sent %d bytes", n)
	}
	return escaped("io_uring socket connected to 127.0.0.1:%d and sent 1 byte", port)
}

func vIOUringOpenat(args []string) result {
	path, err := unix.BytePtrFromString(args[0])
	if err != nil {
		return usage("bad path %q", args[0])
	}
	r, fail := newUring()
	if fail != nil {
		return *fail
	}
	defer r.close()

	atFDCWD := int32(unix.AT_FDCWD)
	fd, err := r.op(uringSQE{opcode: uringOpOpenat, fd: atFDCWD, addr: uint64(uintptr(unsafe.Pointer(path))), opFlags: unix.O_RDONLY | unix.O_CLOEXEC})
	runtime.KeepAlive(path)
	if err != nil {
		return blocked("IORING_OP_OPENAT "+args[0], err)
	}
	defer unix.Close(int(fd))

	buf := make([]byte, 4096)
	n, err := r.op(uringSQE{opcode: uringOpRead, fd: fd, addr: uint64(uintptr(unsafe.Pointer(&buf[0]))), len: uint32(len(buf))})
	runtime.KeepAlive(buf)
	if err != nil {
		return blocked("IORING_OP_READ", err)
	}
	if n == 0 {
		return blockedf("IORING_OP_READ: opened %s but read 0 bytes (empty file?)", args[0])
	}
	return escaped("io_uring read %d bytes of %s", n, args[0])
}
