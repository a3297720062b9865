//go:build linux

package seccomp

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// The kernel tests install the filter for real. A filter cannot be removed,
// so they run in a child: the test binary re-executed with helperEnv set,
// which selects TestHelperProcess and the mode to run.
const helperEnv = "CONFINE_SECCOMP_TEST_HELPER"

func runHelper(t *testing.T, mode string) {
	t.Helper()
	if err := Probe(); err != nil {
		t.Skipf("seccomp user notification unavailable: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestHelperProcess")) {
		t.Fatalf("helper %s: %v\n%s", mode, err, out)
	}
	t.Logf("helper %s:\n%s", mode, out)
}

func TestKernelFilter(t *testing.T) { runHelper(t, "filter") }

func TestKernelListener(t *testing.T) { runHelper(t, "listener") }

func TestKernelProcRules(t *testing.T) { runHelper(t, "proc") }

// TestKernelControl shows, without a filter, that the calls the helper
// expects to fail do work here, and that the kernel ignores the high word
// of int arguments (the reason the filter compares low words only).
func TestKernelControl(t *testing.T) {
	for _, domain := range []uintptr{unix.AF_INET, unix.AF_INET | hi} {
		fd, e := call(unix.SYS_SOCKET, domain, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if e != 0 {
			t.Fatalf("unconfined socket(%#x, SOCK_STREAM): %v", domain, e)
		}
		unix.Close(int(fd))
	}
	fd, e := call(unix.SYS_SOCKET, unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		t.Fatalf("unconfined socket(AF_UNIX, SOCK_DGRAM): %v", e)
	}
	unix.Close(int(fd))

	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(null)
	c := byte('x')
	if _, e := call(unix.SYS_IOCTL, uintptr(null), tiocsti|hi, uintptr(unsafe.Pointer(&c))); e != unix.ENOTTY {
		t.Errorf("unconfined ioctl(/dev/null, TIOCSTI|1<<32) = %v, want ENOTTY", e)
	}
	if master, slave, err := openPTY(); err != nil {
		t.Logf("no pty: %v", err)
	} else {
		defer unix.Close(master)
		defer unix.Close(slave)
		// Succeeds with CAP_SYS_ADMIN (root); proves the kernel reads
		// the truncated command as TIOCSTI.
		_, e := call(unix.SYS_IOCTL, uintptr(slave), tiocsti|hi, uintptr(unsafe.Pointer(&c)))
		t.Logf("unconfined ioctl(pty, TIOCSTI|1<<32) = %v", e)
		if os.Geteuid() == 0 && e != 0 && e != unix.EPERM && e != unix.EIO {
			t.Errorf("unconfined ioctl(pty, TIOCSTI|1<<32) = %v", e)
		}
	}
}

func TestInstallRefusesBadInput(t *testing.T) {
	if _, err := Install(nil, false); err == nil {
		t.Error("Install(nil) succeeded")
	}
	if _, err := Install(make([]bpf.RawInstruction, maxInsns+1), false); err == nil {
		t.Error("Install of an oversized program succeeded")
	}
}

func TestProbe(t *testing.T) {
	if err := Probe(); err != nil {
		t.Skipf("Probe: %v", err)
	}
}

// call makes a raw system call on the current thread.
func call(trap uintptr, args ...uintptr) (uintptr, unix.Errno) {
	var a [6]uintptr
	copy(a[:], args)
	r, _, e := unix.RawSyscall6(trap, a[0], a[1], a[2], a[3], a[4], a[5])
	return r, e
}

// openPTY returns a new pseudo-terminal pair.
func openPTY() (master, slave int, err error) {
	master, err = unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, -1, err
	}
	if err = unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err == nil {
		slave, err = unix.IoctlRetInt(master, unix.TIOCGPTPEER)
	}
	if err != nil {
		unix.Close(master)
		return -1, -1, err
	}
	return master, slave, nil
}

// TestHelperProcess is the child side of the kernel tests; it does nothing
// in a normal run.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper for the kernel tests")
	}
	// The filter goes on this thread only. The goroutine is never
	// unlocked, so the runtime discards the thread when the test ends.
	runtime.LockOSThread()
	arch, err := NativeArch()
	if err != nil {
		t.Fatal(err)
	}
	switch mode {
	case "filter":
		helperFilter(t, arch)
	case "listener":
		helperListener(t, arch)
	case "proc":
		helperProc(t, arch)
	default:
		t.Fatalf("unknown mode %q", mode)
	}
}

func setNoNewPrivs(t *testing.T) {
	t.Helper()
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
}

func helperFilter(t *testing.T, arch plan.Arch) {
	prog, err := Build(plan.Seccomp{Arch: arch})
	if err != nil {
		t.Fatal(err)
	}
	// Without no_new_privs Install must refuse (as root the kernel alone
	// would accept).
	if nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); nnp == 0 {
		if _, err := Install(prog, false); err == nil {
			t.Fatal("Install succeeded without no_new_privs")
		}
	}
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pipe [2]int
	if err := unix.Pipe2(pipe[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	master, slave, ptyErr := openPTY()

	setNoNewPrivs(t)
	fd, err := Install(prog, false)
	if err != nil {
		t.Fatal(err)
	}
	if fd != -1 {
		t.Errorf("Install without listener returned fd %d", fd)
	}

	c := byte('x')
	var n int32
	var ioURingParams [120]byte
	var pair [2]int32
	type kcase struct {
		name string
		trap uintptr
		args []uintptr
		want unix.Errno // 0: must succeed
		fd   bool       // result is an fd to close
	}
	cases := []kcase{
		{"socket(AF_INET)", unix.SYS_SOCKET, []uintptr{unix.AF_INET, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT, false},
		{"socket(AF_INET|1<<32)", unix.SYS_SOCKET, []uintptr{unix.AF_INET | hi, unix.SOCK_STREAM, 0}, unix.EAFNOSUPPORT, false},
		{"socket(AF_INET6)", unix.SYS_SOCKET, []uintptr{unix.AF_INET6, unix.SOCK_DGRAM, 0}, unix.EAFNOSUPPORT, false},
		{"socket(AF_NETLINK)", unix.SYS_SOCKET, []uintptr{unix.AF_NETLINK, unix.SOCK_RAW, 0}, unix.EAFNOSUPPORT, false},
		{"socket(AF_INET, MPTCP)", unix.SYS_SOCKET, []uintptr{unix.AF_INET, unix.SOCK_STREAM, ipprotoMPTCP}, unix.EAFNOSUPPORT, false},
		{"socket(AF_UNIX, STREAM)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, 0, true},
		{"socket(AF_UNIX|garbage<<32, STREAM)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX | 0xdead<<32, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0}, 0, true},
		{"socket(AF_UNIX, SEQPACKET)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX, unix.SOCK_SEQPACKET | unix.SOCK_CLOEXEC, 0}, 0, true},
		{"socket(AF_UNIX, DGRAM)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX, unix.SOCK_DGRAM, 0}, unix.EACCES, false},
		{"socket(AF_UNIX, RAW)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX, unix.SOCK_RAW, 0}, unix.EACCES, false},
		{"socket(AF_UNIX, STREAM, 1)", unix.SYS_SOCKET, []uintptr{unix.AF_UNIX, unix.SOCK_STREAM, 1}, unix.EPROTONOSUPPORT, false},
		{"socketpair(AF_UNIX, STREAM)", unix.SYS_SOCKETPAIR, []uintptr{unix.AF_UNIX, unix.SOCK_STREAM | unix.SOCK_CLOEXEC, 0, uintptr(unsafe.Pointer(&pair))}, 0, false},
		{"socketpair(AF_UNIX, DGRAM)", unix.SYS_SOCKETPAIR, []uintptr{unix.AF_UNIX, unix.SOCK_DGRAM, 0, uintptr(unsafe.Pointer(&pair))}, unix.EACCES, false},
		{"socketpair(AF_INET)", unix.SYS_SOCKETPAIR, []uintptr{unix.AF_INET, unix.SOCK_STREAM, 0, uintptr(unsafe.Pointer(&pair))}, unix.EAFNOSUPPORT, false},
		{"io_uring_setup", unix.SYS_IO_URING_SETUP, []uintptr{1, uintptr(unsafe.Pointer(&ioURingParams))}, unix.ENOSYS, false},
		{"clone3", unix.SYS_CLONE3, []uintptr{0, 0}, unix.ENOSYS, false}, // the kernel would say EINVAL
		{"unshare(CLONE_NEWUSER)", unix.SYS_UNSHARE, []uintptr{unix.CLONE_NEWUSER}, unix.EPERM, false},
		{"ioctl(/dev/null, TIOCSTI)", unix.SYS_IOCTL, []uintptr{uintptr(null), tiocsti, uintptr(unsafe.Pointer(&c))}, unix.EPERM, false},
		{"ioctl(/dev/null, TIOCSTI|1<<32)", unix.SYS_IOCTL, []uintptr{uintptr(null), tiocsti | hi, uintptr(unsafe.Pointer(&c))}, unix.EPERM, false},
		{"ioctl(pipe, FIONREAD)", unix.SYS_IOCTL, []uintptr{uintptr(pipe[0]), fionread, uintptr(unsafe.Pointer(&n))}, 0, false},
		{"personality(query)", unix.SYS_PERSONALITY, []uintptr{0xffffffff}, 0, false},
		{"personality(READ_IMPLIES_EXEC)", unix.SYS_PERSONALITY, []uintptr{readImpliesExec}, unix.EPERM, false},
		{"ptrace(PTRACE_ATTACH, 0)", unix.SYS_PTRACE, []uintptr{unix.PTRACE_ATTACH, 0}, unix.EPERM, false},
		{"mount(NULL...)", unix.SYS_MOUNT, nil, unix.EPERM, false},
		{"bpf(-1)", unix.SYS_BPF, []uintptr{^uintptr(0)}, unix.EPERM, false},
		{"getpid", unix.SYS_GETPID, nil, 0, false},
	}
	if ptyErr == nil {
		cases = append(cases,
			kcase{"ioctl(pty, TIOCSTI|1<<32)", unix.SYS_IOCTL, []uintptr{uintptr(slave), tiocsti | hi, uintptr(unsafe.Pointer(&c))}, unix.EPERM, false},
			kcase{"ioctl(pty, TIOCSTI)", unix.SYS_IOCTL, []uintptr{uintptr(master), tiocsti, uintptr(unsafe.Pointer(&c))}, unix.EPERM, false})
	} else {
		t.Logf("no pty, TIOCSTI checked on /dev/null only: %v", ptyErr)
	}
	for _, c := range cases {
		r, e := call(c.trap, c.args...)
		if e != c.want {
			t.Errorf("%s = %v (%d), want %v", c.name, e, int(e), c.want)
			continue
		}
		t.Logf("%s = %d, %v", c.name, int(r), e)
		if c.fd && e == 0 {
			unix.Close(int(r))
		}
	}
	if st, err := os.ReadFile("/proc/thread-self/status"); err == nil && !strings.Contains(string(st), "Seccomp:\t2") {
		t.Errorf("thread not in seccomp filter mode:\n%s", st)
	}
}

// seccompNotif and seccompNotifResp mirror struct seccomp_notif and struct
// seccomp_notif_resp from <linux/seccomp.h>.
type seccompNotif struct {
	id    uint64
	pid   uint32
	flags uint32
	nr    int32
	arch  uint32
	ip    uint64
	args  [6]uint64
}

type seccompNotifResp struct {
	id    uint64
	val   int64
	error int32
	flags uint32
}

func helperListener(t *testing.T, arch plan.Arch) {
	prog, err := Build(plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true})
	if err != nil {
		t.Fatal(err)
	}
	file, err := unix.Open(filepath.Join(t.TempDir(), "f"), unix.O_CREAT|unix.O_RDWR|unix.O_CLOEXEC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	setNoNewPrivs(t)
	lfd, err := Install(prog, true)
	if err != nil {
		t.Fatal(err)
	}
	if lfd < 0 {
		t.Fatalf("Install with listener returned fd %d", lfd)
	}
	if flags, err := unix.FcntlInt(uintptr(lfd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("listener fd flags %#x, %v: want close-on-exec", flags, err)
	}
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(lfd)); err != nil || !strings.Contains(link, "seccomp") {
		t.Errorf("listener fd is %q, %v", link, err)
	}

	// A round trip: fchmod blocks on this thread until the "supervisor"
	// goroutine answers EROFS, an error the kernel would not give here.
	type got struct {
		req seccompNotif
		err error
	}
	ch := make(chan got, 1)
	go func() {
		var req seccompNotif
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(lfd), unix.SECCOMP_IOCTL_NOTIF_RECV, uintptr(unsafe.Pointer(&req))); e != 0 {
			ch <- got{err: e}
			return
		}
		resp := seccompNotifResp{id: req.id, error: -int32(unix.EROFS)}
		_, _, e := unix.Syscall(unix.SYS_IOCTL, uintptr(lfd), unix.SECCOMP_IOCTL_NOTIF_SEND, uintptr(unsafe.Pointer(&resp)))
		if e != 0 {
			ch <- got{req: req, err: e}
			return
		}
		ch <- got{req: req}
	}()
	if err := unix.Fchmod(file, 0o600); !errors.Is(err, unix.EROFS) {
		t.Errorf("fchmod under notification = %v, want EROFS from the supervisor", err)
	}
	g := <-ch
	if g.err != nil {
		t.Fatalf("supervisor: %v", g.err)
	}
	audit, table, _ := archInfo(arch)
	if uint32(g.req.nr) != table["fchmod"] || g.req.arch != audit || g.req.args[0] != uint64(file) || g.req.args[1] != 0o600 {
		t.Errorf("notification %+v, want fchmod(%d, 0600)", g.req, file)
	}
	if g.req.pid != uint32(unix.Gettid()) {
		t.Errorf("notification from %d, want this thread %d", g.req.pid, unix.Gettid())
	}
	// Fixed rules still apply under a listener.
	if _, e := call(unix.SYS_SOCKET, unix.AF_INET, unix.SOCK_STREAM, 0); e != unix.EAFNOSUPPORT {
		t.Errorf("socket(AF_INET) = %v", e)
	}
	unix.Close(lfd)
	// With the listener gone the kernel fails notified calls with ENOSYS.
	if err := unix.Fchmod(file, 0o600); !errors.Is(err, unix.ENOSYS) {
		t.Errorf("fchmod after closing the listener = %v, want ENOSYS", err)
	}
}
