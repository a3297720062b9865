//go:build linux && (amd64 || arm64)

package notify

// Test harness. The test binary re-executes itself in two extra roles:
//
//   - "install": LockOSThread, no_new_privs, install a small seccomp filter
//     routing the handled calls to SECCOMP_RET_USER_NOTIF (with a new
//     listener), pass the listener to the parent over the socket in fd 3, then
//     exec the binary again as "probe" (the filter survives the exec);
//   - "probe": perform the system calls listed in NOTIFY_TEST_OPS with raw
//     syscalls, from a locked thread, and print the errnos as JSON.
//
// The parent (the test itself, running as root) plays the supervisor.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/testutil"
)

const (
	envMode     = "NOTIFY_TEST_MODE"
	envOps      = "NOTIFY_TEST_OPS"
	envBase     = "NOTIFY_TEST_BASE"
	envDropCaps = "NOTIFY_TEST_DROPCAPS"
)

// testBin is a copy of the test binary in a world-readable directory, so that
// uid 65534 can execute it.
var (
	sharedDir string
	testBin   string
)

func TestMain(m *testing.M) {
	switch os.Getenv(envMode) {
	case "install":
		installAndExec()
		return
	case "probe":
		probeMain()
		return
	}
	os.Exit(runTests(m))
}

func runTests(m *testing.M) int {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "notify tests need root (they run probes as uid 0 and 65534)")
		return m.Run()
	}
	var err error
	sharedDir, err = os.MkdirTemp("", "notifytest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(sharedDir)
	if err := os.Chmod(sharedDir, 0o755); err != nil {
		panic(err)
	}
	self, err := os.Executable()
	if err != nil {
		panic(err)
	}
	testBin = filepath.Join(sharedDir, "notify.test")
	if err := testutil.CopyFile(self, testBin, 0o755); err != nil {
		panic(err)
	}
	return m.Run()
}

func needRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 || testBin == "" {
		t.Skip("needs root")
	}
}

// testFilter routes every call in sysTable to the supervisor and allows
// everything else; a foreign architecture kills the process.
func testFilter() []unix.SockFilter {
	nrs := make([]int32, 0, len(sysTable))
	fork := os.Getenv(envFork) == "1"
	for nr, e := range sysTable {
		// Task creation only when a test asks (fork_test.go): the
		// others' supervisors have no limit and would refuse it. Those
		// tests' probes kill their own children, which the calls naming
		// another process (without an Init) may not.
		if e.kind == sysSocket && os.Getenv(envInet) != "1" {
			// socket() only for the egress tests (inet_test.go).
			continue
		}
		if isCreateKind(e.kind) && os.Getenv(envCreate) != "1" {
			// Name creation only for the guard's tests (create_test.go).
			continue
		}
		if (e.kind != sysFork || fork) && !(fork && isProcKind(e.kind)) {
			nrs = append(nrs, nr)
		}
	}
	slices.Sort(nrs)
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeArch, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_KILL_PROCESS},
		bpf.LoadAbsolute{Off: 0, Size: 4}, // seccomp_data.nr
	}
	for _, nr := range nrs {
		if k := sysTable[nr].kind; k == sysOpen || k == sysOpenat {
			// As confine's filter: only O_CREAT opens.
			flags := uint32(1)
			if k == sysOpenat {
				flags = 2
			}
			prog = append(prog,
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 4},
				bpf.LoadAbsolute{Off: 16 + 8*flags, Size: 4},
				bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.O_CREAT, SkipFalse: 1},
				bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF},
				bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
			continue
		}
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(nr), SkipFalse: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_USER_NOTIF})
	}
	if os.Getenv(envFork) == "1" {
		// As confine's filter: clone3 hides its flags, so libc (cgo's
		// pthread_create) must fall back to clone.
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
			bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)})
	}
	prog = append(prog, bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW})
	raw, err := bpf.Assemble(prog)
	if err != nil {
		panic(err)
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out
}

func installAndExec() {
	die := func(what string, err error) {
		fmt.Fprintf(os.Stderr, "install: %s: %v\n", what, err)
		os.Exit(111)
	}
	// The filter is installed on this thread only (no TSYNC); exec replaces
	// the whole process by this thread, so the probe inherits it.
	runtime.LockOSThread()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		die("no_new_privs", err)
	}
	filter := testFilter()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	// WAIT_KILLABLE_RECV, as the launcher sets it (internal/seccomp):
	// otherwise a signal arriving after the supervisor acted (connected
	// the socket) restarts the call, which then finds it connected.
	lfd, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		unix.SECCOMP_FILTER_FLAG_NEW_LISTENER|unix.SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, uintptr(unsafe.Pointer(&prog)))
	if e == unix.EINVAL {
		// Before Linux 5.19.
		lfd, _, e = unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
			unix.SECCOMP_FILTER_FLAG_NEW_LISTENER, uintptr(unsafe.Pointer(&prog)))
	}
	if e != 0 {
		die("seccomp", e)
	}
	if err := unix.Sendmsg(3, []byte{0}, unix.UnixRights(int(lfd)), nil, 0); err != nil {
		die("sendmsg", err)
	}
	unix.Close(int(lfd))
	unix.Close(3)
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, envMode+"=") })
	env = append(env, envMode+"=probe")
	self, err := os.Executable()
	if err != nil {
		die("executable", err)
	}
	if err := syscall.Exec(self, []string{self}, env); err != nil {
		die("exec", err)
	}
}

// probeOp is one system call for the probe to make. Paths may contain $BASE.
type probeOp struct {
	Name string
	Call string
	Path string
	// NullPath passes NULL instead of Path.
	NullPath bool
	// ProcSelfFD passes "/proc/self/fd/<FD>" instead of Path.
	ProcSelfFD bool
	// Dir, if set, is opened O_DIRECTORY and passed as dirfd (else AT_FDCWD,
	// or the FD when only FD is set).
	Dir string
	// FD, if set, is opened with FDFlags (default O_RDONLY) and passed as
	// the descriptor argument.
	FD      string
	FDFlags int
	Mode    uint32
	Owner   string // "", "self" or a number; "" means -1
	Group   string
	Flags   int
	Times   string // "", "explicit", "omit", "now"
	XName   string
	XValue  string
	// Sock is the connect() target: a path or "@abstract"; Family "inet"
	// connects an AF_INET socket to 127.0.0.1:1 instead.
	Sock   string
	Family string
	// AddrLen overrides the sockaddr length when not zero.
	AddrLen int
	// SockType "dgram" or "seqpacket" replaces SOCK_STREAM; Nonblock
	// adds SOCK_NONBLOCK, NoCloexec drops SOCK_CLOEXEC; Bind binds the
	// socket first (autobind); Unspec connects it first to Sock, then to
	// AF_UNSPEC.
	SockType  string
	Nonblock  bool
	NoCloexec bool
	Bind      bool
	Unspec    bool
	// Race parameters (Call "race-*"): Path is flipped with Alt.
	Alt  string
	Iter int
	// Pid and Sig for the process calls (proc_targets_test.go).
	Pid int
	Sig int
}

type probeResult struct {
	Name  string
	Errno int
	Err   string // errno name, or a setup failure
	Byte  string // byte received after a successful connect
	// After a successful connect: the descriptor's flags ("nonblock",
	// "cloexec"), and whether getpeername names a peer.
	FDState string
	// Race statistics: successes and failures of the attacked call.
	OK, Fail int
}

func probeMain() {
	// All calls come from this thread, which alone drops its capabilities
	// (capabilities are per thread).
	runtime.LockOSThread()
	if os.Getenv(envDropCaps) == "1" {
		var d [2]unix.CapUserData
		if err := capset(&d); err != nil {
			fmt.Fprintln(os.Stderr, "probe: capset:", err)
			os.Exit(112)
		}
	}
	var ops []probeOp
	if err := json.Unmarshal([]byte(os.Getenv(envOps)), &ops); err != nil {
		fmt.Fprintln(os.Stderr, "probe: ops:", err)
		os.Exit(113)
	}
	base := os.Getenv(envBase)
	res := make([]probeResult, 0, len(ops))
	for _, op := range ops {
		r := runOp(op, base)
		r.Name = op.Name
		res = append(res, r)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		os.Exit(114)
	}
	os.Exit(0)
}

// cstr returns a NUL-terminated copy of s; the slice keeps it alive.
// cwdFD is AT_FDCWD (a variable: the negative constant does not convert to
// uintptr).
var cwdFD = unix.AT_FDCWD

func cstr(s string) []byte { return append([]byte(s), 0) }

func ptr(b []byte) uintptr {
	if b == nil {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}

func idArg(s string, self int) uintptr {
	switch s {
	case "":
		return uintptr(^uint32(0))
	case "self":
		return uintptr(self)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		panic(err)
	}
	return uintptr(n)
}

var explicitTime = [2]unix.Timespec{{Sec: 1000000000, Nsec: 500}, {Sec: 1000000000, Nsec: 500}}

func runOp(op probeOp, base string) (r probeResult) {
	expand := func(s string) string { return strings.ReplaceAll(s, "$BASE", base) }
	setupFail := func(what string, err error) probeResult {
		return probeResult{Errno: -1, Err: what + ": " + err.Error()}
	}
	if strings.HasPrefix(op.Call, "race-") {
		return runRace(op, expand)
	}
	fd := -1
	if op.FD != "" {
		fl := op.FDFlags
		if fl == 0 {
			fl = unix.O_RDONLY
		}
		var err error
		if fd, err = unix.Open(expand(op.FD), fl|unix.O_CLOEXEC, 0); err != nil {
			return setupFail("open fd", err)
		}
		defer unix.Close(fd)
	}
	dir := unix.AT_FDCWD
	if op.Dir != "" {
		var err error
		if dir, err = unix.Open(expand(op.Dir), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return setupFail("open dir", err)
		}
		defer unix.Close(dir)
	} else if fd >= 0 {
		dir = fd
	}
	path := cstr(strings.ReplaceAll(expand(op.Path), "$FD", strconv.Itoa(fd)))
	if op.ProcSelfFD {
		path = cstr("/proc/self/fd/" + strconv.Itoa(fd))
	}
	if op.NullPath {
		path = nil
	}
	uid, gid := os.Getuid(), os.Getgid()
	owner, group := idArg(op.Owner, uid), idArg(op.Group, gid)
	var times uintptr
	var omit = [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	var now = [2]unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}}
	var tv = [2]unix.Timeval{{Sec: explicitTime[0].Sec}, {Sec: explicitTime[1].Sec}}
	var ub = [2]int64{explicitTime[0].Sec, explicitTime[1].Sec}
	name, value := cstr(op.XName), []byte(op.XValue)
	if len(value) == 0 {
		value = []byte{0}
	}
	xargs := struct {
		Value uint64
		Size  uint32
		Flags uint32
	}{uint64(ptr(value)), uint32(len(op.XValue)), 0}
	sys := func(nr uintptr, a ...uintptr) unix.Errno {
		for len(a) < 6 {
			a = append(a, 0)
		}
		_, _, e := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
		runtime.KeepAlive(path)
		runtime.KeepAlive(name)
		runtime.KeepAlive(value)
		return e
	}
	d, f, m, fl := uintptr(dir), uintptr(fd), uintptr(op.Mode), uintptr(op.Flags)
	var e unix.Errno
	switch op.Call {
	case "chmod", "chown", "lchown", "rename", "link":
		e = legacyCall(op.Call, sys, d, path, cstr(expand(op.Alt)), m, owner, group, 0)
	case "fchmod":
		e = sys(unix.SYS_FCHMOD, f, m)
	case "fchmodat":
		e = sys(unix.SYS_FCHMODAT, d, ptr(path), m)
	case "fchmodat2":
		e = sys(unix.SYS_FCHMODAT2, d, ptr(path), m, fl)
	case "fchown":
		e = sys(unix.SYS_FCHOWN, f, owner, group)
	case "fchownat":
		e = sys(unix.SYS_FCHOWNAT, d, ptr(path), owner, group, fl)
	case "utime", "utimes", "futimesat", "utimensat":
		switch op.Times {
		case "explicit":
			switch op.Call {
			case "utime":
				times = uintptr(unsafe.Pointer(&ub))
			case "utimes", "futimesat":
				times = uintptr(unsafe.Pointer(&tv))
			default:
				times = uintptr(unsafe.Pointer(&explicitTime))
			}
		case "omit":
			times = uintptr(unsafe.Pointer(&omit))
		case "now":
			times = uintptr(unsafe.Pointer(&now))
		}
		if op.Call == "utimensat" {
			e = sys(unix.SYS_UTIMENSAT, d, ptr(path), times, fl)
		} else {
			e = legacyCall(op.Call, sys, d, path, nil, m, owner, group, times)
		}
	case "setxattr":
		e = sys(unix.SYS_SETXATTR, ptr(path), ptr(name), ptr(value), uintptr(len(op.XValue)), fl)
	case "lsetxattr":
		e = sys(unix.SYS_LSETXATTR, ptr(path), ptr(name), ptr(value), uintptr(len(op.XValue)), fl)
	case "fsetxattr":
		e = sys(unix.SYS_FSETXATTR, f, ptr(name), ptr(value), uintptr(len(op.XValue)), fl)
	case "setxattrat":
		e = sys(unix.SYS_SETXATTRAT, d, ptr(path), fl, ptr(name), uintptr(unsafe.Pointer(&xargs)), unsafe.Sizeof(xargs))
	case "removexattr":
		e = sys(unix.SYS_REMOVEXATTR, ptr(path), ptr(name))
	case "lremovexattr":
		e = sys(unix.SYS_LREMOVEXATTR, ptr(path), ptr(name))
	case "fremovexattr":
		e = sys(unix.SYS_FREMOVEXATTR, f, ptr(name))
	case "removexattrat":
		e = sys(unix.SYS_REMOVEXATTRAT, d, ptr(path), fl, ptr(name))
	case "connect":
		return probeConnect(op, expand)
	case "kill", "kill-child", "prlimit", "pidfd-kill", "tgkill", "sigqueue":
		return probeProc(op)
	case "sleep":
		time.Sleep(time.Duration(op.Iter) * time.Millisecond)
	case "mark":
		// Tell the test this point was reached.
		if err := os.WriteFile(expand(op.Path), nil, 0o644); err != nil {
			return setupFail("mark", err)
		}
	case "await":
		// Wait for the test to create Path.
		for deadline := time.Now().Add(probeHang); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(expand(op.Path)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				return setupFail("await", os.ErrNotExist)
			}
		}
	case "truncate", "renameat2", "linkat":
		e = fileOp(op, sys, d, path, cstr(expand(op.Alt)))
	case "mkdirat", "symlinkat", "mknodat", "openat-creat":
		e = createOp(op, sys, d, path, cstr(expand(op.Alt)))
	case "forks":
		return runForks(op)
	case "inet":
		return probeInet(op)
	default:
		return setupFail("unknown call", errors.New(op.Call))
	}
	return probeResult{Errno: int(e), Err: errName(e)}
}

func errName(e unix.Errno) string {
	if e == 0 {
		return "OK"
	}
	return unix.ErrnoName(e)
}

// rawSockaddrUn builds a sockaddr_un; "@x" is the abstract name "\0x".
func rawSockaddrUn(name string) []byte {
	b := make([]byte, 2, 2+len(name)+1)
	*(*uint16)(unsafe.Pointer(&b[0])) = unix.AF_UNIX
	if strings.HasPrefix(name, "@") {
		return append(append(b, 0), name[1:]...)
	}
	return append(append(b, name...), 0)
}

func probeConnect(op probeOp, expand func(string) string) probeResult {
	domain, sa := unix.AF_UNIX, []byte(nil)
	if op.Family == "inet" {
		domain = unix.AF_INET
		var in unix.RawSockaddrInet4
		in.Family = unix.AF_INET
		in.Port = 1 << 8 // port 1, network byte order
		in.Addr = [4]byte{127, 0, 0, 1}
		sa = unsafe.Slice((*byte)(unsafe.Pointer(&in)), unsafe.Sizeof(in))
	} else {
		sa = rawSockaddrUn(expand(op.Sock))
	}
	typ := unix.SOCK_STREAM
	switch op.SockType {
	case "dgram":
		typ = unix.SOCK_DGRAM
	case "seqpacket":
		typ = unix.SOCK_SEQPACKET
	}
	if op.Nonblock {
		typ |= unix.SOCK_NONBLOCK
	}
	if !op.NoCloexec {
		typ |= unix.SOCK_CLOEXEC
	}
	s, err := unix.Socket(domain, typ, 0)
	if err != nil {
		return probeResult{Errno: -1, Err: "socket: " + err.Error()}
	}
	defer unix.Close(s)
	if op.Bind {
		// An address of family only: autobind to an abstract name.
		var fam [2]byte
		*(*uint16)(unsafe.Pointer(&fam[0])) = unix.AF_UNIX
		if _, _, e := unix.Syscall(unix.SYS_BIND, uintptr(s), ptr(fam[:]), 2); e != 0 {
			return probeResult{Errno: -1, Err: "bind: " + e.Error()}
		}
	}
	if op.Unspec {
		if _, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), ptr(sa), uintptr(len(sa))); e != 0 {
			return probeResult{Errno: int(e), Err: "first connect: " + errName(e)}
		}
		var un [2]byte // AF_UNSPEC is 0
		sa = un[:]
	}
	l := len(sa)
	if op.AddrLen != 0 {
		l = op.AddrLen
		sa = append(sa, make([]byte, 256)...)
	}
	_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), ptr(sa), uintptr(l))
	r := probeResult{Errno: int(e), Err: errName(e)}
	if e == 0 {
		r.FDState = fdState(s)
	}
	if e == 0 && domain == unix.AF_UNIX && typ&0xf == unix.SOCK_STREAM {
		if b, ok := awaitByte(s); ok {
			r.Byte = string(b)
			_, _ = unix.Write(s, []byte{'y'})
		}
	}
	return r
}

// awaitByte waits for the listener's byte on s, blocking or not. It waits
// for the event, not for a time: poll is retried when a signal interrupts
// it (poll is never restarted, and a read with SO_RCVTIMEO neither: both
// returned early on a loaded host), and its bound (probeHang) only keeps a
// broken run from hanging the test.
func awaitByte(s int) (byte, bool) {
	deadline := time.Now().Add(probeHang)
	for {
		fds := []unix.PollFd{{Fd: int32(s), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds()))
		if err == unix.EINTR && time.Now().Before(deadline) {
			continue
		}
		if err != nil || n == 0 {
			return 0, false
		}
		var b [1]byte
		for {
			n, err := unix.Read(s, b[:])
			if err == unix.EINTR {
				continue
			}
			return b[0], n == 1
		}
	}
}

// probeHang bounds what a probe or a fixture's listener waits for: not a
// timing assumption (every wait ends on its event, the byte, EOF or the
// probe's exit), only how long a broken run may hang before it fails.
const probeHang = 2 * time.Minute

// fixture is a directory tree for one probe run:
//
//	base/            cwd of the probe
//	  w/             the writable root
//	    f f2         files owned by uid
//	    g            owned by uid, group 0
//	    rootfile     owned by root
//	    lnk   -> base/out/f
//	    lnkin -> f
//	    slnk  -> base/out/s.sock
//	    sub/
//	    priv/        0700, owned by root
//	      f          owned by uid
//	    s.sock       listener
//	  out/           outside every root
//	    f            owned by uid, xattrs user.pre*
//	    s.sock       listener
//	    allowed.sock listener, allowlisted
type fixture struct {
	base, w, out string
	uid          int
	abstract     string
	// noUserXattr: the fixture's file system has no user.* xattrs
	// (tmpfs before Linux 6.6), so rows naming one cannot run.
	noUserXattr bool

	mu    sync.Mutex
	conns map[string][]unix.Ucred // listener name -> peer credentials seen
	// open counts the accepted connections not yet closed.
	open sync.WaitGroup
}

func newFixture(t testing.TB, uid int) *fixture {
	t.Helper()
	base, err := os.MkdirTemp(sharedDir, "fx")
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{base: base, w: filepath.Join(base, "w"), out: filepath.Join(base, "out"), uid: uid,
		abstract: fmt.Sprintf("notifytest-%d-%s", os.Getpid(), filepath.Base(base)),
		conns:    map[string][]unix.Ucred{}}
	t.Cleanup(func() { os.RemoveAll(base) })
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Chmod(base, 0o755))
	must(os.Chown(base, uid, uid))
	for _, d := range []string{fx.w, fx.out, filepath.Join(fx.w, "sub"), filepath.Join(fx.w, "priv")} {
		must(os.Mkdir(d, 0o755))
		must(os.Chown(d, uid, uid))
	}
	must(os.Chown(filepath.Join(fx.w, "priv"), 0, 0))
	gd := filepath.Join(fx.w, "gd")
	must(os.Mkdir(gd, 0o755))
	must(os.Chown(gd, uid, 0))
	must(os.Chmod(filepath.Join(fx.w, "priv"), 0o700))
	files := map[string][2]int{
		"w/f": {uid, uid}, "w/f2": {uid, uid}, "w/g": {uid, 0}, "w/rootfile": {0, 0},
		"w/priv/f": {uid, uid}, "out/f": {uid, uid},
	}
	for name, own := range files {
		p := filepath.Join(base, name)
		must(os.WriteFile(p, []byte("data"), 0o644))
		must(os.Chmod(p, 0o644))
		must(os.Chown(p, own[0], own[1]))
	}
	for _, x := range []string{"user.pre", "user.pre2", "user.pre3"} {
		err := unix.Setxattr(filepath.Join(fx.out, "f"), x, []byte("1"), 0)
		if err == unix.EOPNOTSUPP && x == "user.pre" {
			fx.noUserXattr = true
			break
		}
		must(err)
	}
	links := map[string]string{
		"w/lnk": filepath.Join(fx.out, "f"), "w/lnkin": "f", "w/slnk": filepath.Join(fx.out, "s.sock"),
	}
	for name, target := range links {
		p := filepath.Join(base, name)
		must(os.Symlink(target, p))
		must(os.Lchown(p, uid, uid))
	}
	for _, name := range []string{"w/s.sock", "out/s.sock", "out/allowed.sock", "@" + fx.abstract} {
		addr := name
		if !strings.HasPrefix(name, "@") {
			addr = filepath.Join(base, name)
		}
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
		must(err)
		if !strings.HasPrefix(name, "@") {
			must(os.Lchown(addr, uid, uid))
		}
		t.Cleanup(func() { l.Close() })
		go fx.serve(name, l)
	}
	return fx
}

func (fx *fixture) serve(name string, l *net.UnixListener) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return
		}
		var cred unix.Ucred
		if rc, err := c.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) {
				if u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
					cred = *u
				}
			})
		}
		fx.mu.Lock()
		fx.conns[name] = append(fx.conns[name], cred)
		fx.mu.Unlock()
		// Each connection on its own: one the probe is slow to answer
		// never holds up the next accept.
		fx.open.Add(1)
		go func() {
			defer fx.open.Done()
			defer c.Close()
			_, _ = c.Write([]byte{'x'})
			// The probe's answer, or EOF when it closes or exits.
			_ = c.SetReadDeadline(time.Now().Add(probeHang))
			var b [1]byte
			_, _ = c.Read(b[:])
		}()
	}
}

// quiet waits until every connection the listeners accepted is closed
// (after the probe exited, each ends with EOF).
func (fx *fixture) quiet() { fx.open.Wait() }

func (fx *fixture) peers(name string) []unix.Ucred {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	return slices.Clone(fx.conns[name])
}

func (fx *fixture) config(stats *Stats) Config {
	return Config{
		Plan: &plan.Plan{Backend: plan.BackendCore,
			WritableRoots: []string{fx.w},
			SocketAllow:   []string{filepath.Join(fx.out, "allowed.sock")}},
		Stats: stats,
	}
}

type runOpts struct {
	confined bool
	dropCaps bool
	cfg      Config
	timeout  time.Duration
	// withInit makes the probe the run's init (Config.Init): its
	// descendants are the run's processes.
	withInit bool
}

// runProbe runs ops in a probe as fx.uid, confined by the test filter and
// supervised by Serve, or unconfined as a control.
func runProbe(t testing.TB, fx *fixture, ops []probeOp, o runOpts) []probeResult {
	t.Helper()
	js := mustJSON(t, ops)
	cmd := exec.Command(testBin)
	cmd.Dir = fx.base
	cmd.Env = append(os.Environ(), envOps+"="+js, envBase+"="+fx.base)
	if o.dropCaps {
		cmd.Env = append(cmd.Env, envDropCaps+"=1")
	}
	if fx.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(fx.uid), Gid: uint32(fx.uid)}}
	}
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if o.timeout == 0 {
		o.timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	var serveErr chan error
	var lfd = -1
	if !o.confined {
		cmd.Env = append(cmd.Env, envMode+"=probe")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	} else {
		cmd.Env = append(cmd.Env, envMode+"=install")
		parent, child := socketpair(t)
		cmd.ExtraFiles = []*os.File{child}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		child.Close()
		lfd = recvFD(t, parent)
		parent.Close()
		if o.withInit {
			// The probe is our unreaped child: its pid is still its own.
			ifd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer unix.Close(ifd)
			o.cfg.Init = &Init{Pid: cmd.Process.Pid, Pidfd: ifd}
		}
		serveErr = make(chan error, 1)
		go func() { serveErr <- Serve(ctx, lfd, o.cfg) }()
	}
	waitErr := cmd.Wait()
	if serveErr != nil {
		select {
		case err := <-serveErr:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("Serve did not return after the probe exited")
		}
		unix.Close(lfd)
	}
	if waitErr != nil {
		t.Fatalf("probe: %v\nstderr: %s", waitErr, stderr.String())
	}
	res := mustUnmarshal(t, stdout.String())
	for _, r := range res {
		if r.Errno < 0 {
			t.Fatalf("probe op %s: %s", r.Name, r.Err)
		}
	}
	return res
}

func socketpair(t testing.TB) (parent, child *os.File) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fds[0]), "parent"), os.NewFile(uintptr(fds[1]), "child")
}

func recvFD(t testing.TB, f *os.File) int {
	t.Helper()
	buf, oob := make([]byte, 1), make([]byte, unix.CmsgSpace(4))
	_, oobn, _, _, err := unix.Recvmsg(int(f.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		t.Fatalf("recvmsg: %v", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		t.Fatalf("no listener received (child failed?): %v", err)
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		t.Fatalf("bad rights: %v", err)
	}
	return fds[0]
}

// snapshot records everything about the files under dir that the handled
// calls could change.
func snapshot(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		desc := fmt.Sprintf("mode=%o uid=%d gid=%d mtime=%d.%d", st.Mode, st.Uid, st.Gid, st.Mtim.Sec, st.Mtim.Nsec)
		if ft := st.Mode & unix.S_IFMT; ft != unix.S_IFDIR && ft != unix.S_IFSOCK {
			// (Walking a directory, connecting to a socket update atime.)
			desc += fmt.Sprintf(" atime=%d.%d", st.Atim.Sec, st.Atim.Nsec)
		}
		buf := make([]byte, 4096)
		if n, err := unix.Llistxattr(p, buf); err == nil {
			names := strings.Split(strings.TrimRight(string(buf[:n]), "\x00"), "\x00")
			slices.Sort(names)
			for _, x := range names {
				if x == "" {
					continue
				}
				v := make([]byte, 256)
				m, _ := unix.Lgetxattr(p, x, v)
				desc += fmt.Sprintf(" %s=%q", x, v[:max(m, 0)])
			}
		}
		out[p] = desc
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func countFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// runRace attacks the supervisor's time of check versus time of use: while
// one thread issues the call Iter times (from a thread that is not the
// thread-group leader), another keeps swapping what the call refers to
// between Path (inside the writable root) and Alt (outside).
func runRace(op probeOp, expand func(string) string) probeResult {
	in, alt := expand(op.Path), expand(op.Alt)
	var stop atomic.Bool
	var flips atomic.Int64
	var attack func() unix.Errno
	var flip func()
	switch op.Call {
	case "race-memflip":
		buf := make([]byte, 512)
		a, b := cstr(in), cstr(alt)
		flip = func() {
			copy(buf, a)
			copy(buf, b)
		}
		attack = func() unix.Errno {
			return chmodRaw(buf, op.Mode)
		}
	case "race-symlink":
		link, tmp := in+".swap", in+".swap.tmp"
		_ = os.Symlink(in, link)
		flip = func() {
			_ = os.Symlink(in, tmp)
			_ = os.Rename(tmp, link)
			_ = os.Symlink(alt, tmp)
			_ = os.Rename(tmp, link)
		}
		lp := cstr(link)
		attack = func() unix.Errno {
			return chmodRaw(lp, op.Mode)
		}
	case "race-fdswap":
		fin, err1 := unix.Open(in, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		fout, err2 := unix.Open(alt, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err := errors.Join(err1, err2); err != nil {
			return probeResult{Errno: -1, Err: err.Error()}
		}
		const n = 200
		flip = func() {
			_ = unix.Dup3(fin, n, unix.O_CLOEXEC)
			_ = unix.Dup3(fout, n, unix.O_CLOEXEC)
		}
		attack = func() unix.Errno {
			_, _, e := unix.Syscall(unix.SYS_FCHMOD, n, uintptr(op.Mode), 0)
			return e
		}
	case "race-connect":
		buf := make([]byte, 110) // sizeof(struct sockaddr_un)
		a, b := rawSockaddrUn(in), rawSockaddrUn(alt)
		flip = func() {
			copy(buf, a)
			copy(buf, b)
		}
		attack = func() unix.Errno {
			s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err.(unix.Errno)
			}
			defer unix.Close(s)
			_, _, e := unix.Syscall(unix.SYS_CONNECT, uintptr(s), ptr(buf), uintptr(len(buf)))
			return e
		}
	default:
		return probeResult{Errno: -1, Err: "unknown race " + op.Call}
	}
	if in != alt {
		go func() {
			for !stop.Load() {
				flip()
				flips.Add(1)
			}
		}()
		for flips.Load() == 0 {
			runtime.Gosched()
		}
	} else {
		flip()
	}
	var r probeResult
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		for range op.Iter {
			if attack() == 0 {
				r.OK++
			} else {
				r.Fail++
			}
		}
	}()
	<-done
	stop.Store(true)
	r.Err = fmt.Sprintf("ok=%d fail=%d flips=%d", r.OK, r.Fail, flips.Load())
	return r
}

func mustJSON(t testing.TB, ops []probeOp) string {
	t.Helper()
	js, err := json.Marshal(ops)
	if err != nil {
		t.Fatal(err)
	}
	return string(js)
}

func mustUnmarshal(t testing.TB, out string) []probeResult {
	t.Helper()
	var res []probeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("probe output: %v\n%s", err, out)
	}
	return res
}

// fdState describes a connected socket descriptor for the fallback test:
// its O_NONBLOCK and FD_CLOEXEC flags and whether it has a peer.
func fdState(s int) string {
	var st []string
	if fl, err := unix.FcntlInt(uintptr(s), unix.F_GETFL, 0); err == nil && fl&unix.O_NONBLOCK != 0 {
		st = append(st, "nonblock")
	}
	if fl, err := unix.FcntlInt(uintptr(s), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC != 0 {
		st = append(st, "cloexec")
	}
	if _, err := unix.Getpeername(s); err == nil {
		st = append(st, "peer")
	}
	return strings.Join(st, ",")
}
