//go:build linux && (amd64 || arm64)

package notify

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/proctree"
)

// probeProc runs the process ops of the harness probe. Pid -1 in "kill"
// is kill(-1); "kill-child" and "pidfd-kill" with Pid 0 act on a sleep the
// probe starts itself and report how it ended in Byte.
func probeProc(op probeOp) probeResult {
	var child *exec.Cmd
	pid := op.Pid
	if (op.Call == "kill-child" || op.Call == "pidfd-kill" || op.Call == "tgkill" || op.Call == "sigqueue") && pid == 0 {
		child = exec.Command("/bin/sleep", "100")
		if err := child.Start(); err != nil {
			return probeResult{Errno: -1, Err: "start child: " + err.Error()}
		}
		pid = child.Process.Pid
		defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	}
	if pid == -2 {
		pid = os.Getpid()
	}
	var e unix.Errno
	switch op.Call {
	case "kill", "kill-child":
		_, _, e = unix.Syscall(unix.SYS_KILL, uintptr(pid), uintptr(op.Sig), 0)
	case "prlimit":
		lim := unix.Rlimit{Cur: 77, Max: 1 << 20}
		var old unix.Rlimit
		if err := unix.Prlimit(pid, unix.RLIMIT_NOFILE, nil, &old); err != nil {
			return probeResult{Errno: -1, Err: "prlimit get: " + err.Error()}
		}
		lim.Max = old.Max
		_, _, e = unix.Syscall6(unix.SYS_PRLIMIT64, uintptr(pid), unix.RLIMIT_NOFILE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0)
	case "tgkill":
		_, _, e = unix.Syscall(unix.SYS_TGKILL, uintptr(pid), uintptr(pid), uintptr(op.Sig))
	case "sigqueue":
		var info [128]byte
		si := (*unix.Siginfo)(unsafe.Pointer(&info[0]))
		si.Signo, si.Code = int32(op.Sig), -1 // SI_QUEUE
		_, _, e = unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(op.Sig), uintptr(unsafe.Pointer(&info[0])))
	case "pidfd-kill":
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return probeResult{Errno: -1, Err: "pidfd_open: " + err.Error()}
		}
		defer unix.Close(fd)
		_, _, e = unix.Syscall6(unix.SYS_PIDFD_SEND_SIGNAL, uintptr(fd), uintptr(op.Sig), 0, 0, 0, 0)
	}
	r := probeResult{Errno: int(e), Err: errName(e)}
	if child != nil && e == 0 {
		_ = child.Wait()
		if ws, ok := child.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.Byte = ws.Signal().String()
		}
	}
	return r
}

// kernelHasPidfdThread says whether pidfd_open takes PIDFD_THREAD.
func kernelHasPidfdThread() bool {
	fd, err := unix.PidfdOpen(unix.Gettid(), pidfdThread)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// TestProcTargets: with the probe as the run's init, calls aimed at a
// process the test started (outside the run) fail with EPERM or ESRCH and
// leave it untouched, while the probe still reaches itself and its child.
// The control (unconfined) shows the same calls reach the outsider.
func TestProcTargets(t *testing.T) {
	needRoot(t)
	for _, uid := range []int{0, 65534} {
		t.Run(strconv.Itoa(uid), func(t *testing.T) {
			fx := newFixture(t, uid)
			// A fresh victim per phase: root here may lack
			// CAP_SYS_RESOURCE to undo the control's limit.
			start := func() int {
				v := exec.Command("/bin/sleep", "300")
				v.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
				if err := v.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = v.Process.Kill(); _ = v.Wait() })
				return v.Process.Pid
			}
			vpid := start()
			control := runProbe(t, fx, []probeOp{
				{Name: "kill0", Call: "kill", Pid: vpid},
				{Name: "prlimit", Call: "prlimit", Pid: vpid},
				{Name: "killall0", Call: "kill", Pid: -1},
			}, runOpts{})
			for _, r := range control {
				if r.Errno != 0 {
					t.Fatalf("control %s: %s; the attack does not work here", r.Name, r.Err)
				}
			}
			if l, _ := os.ReadFile("/proc/" + strconv.Itoa(vpid) + "/limits"); !strings.Contains(string(l), " 77 ") {
				t.Fatalf("the control's prlimit did not show:\n%s", l)
			}
			vpid = start()

			// A process group that no longer exists: ESRCH, not a denial.
			gone := exec.Command("/bin/true")
			gone.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := gone.Run(); err != nil {
				t.Fatal(err)
			}
			gonePgid := gone.Process.Pid

			stats := &Stats{}
			cfg := fx.config(stats)
			res := runProbe(t, fx, []probeOp{
				{Name: "kill-victim", Call: "kill", Pid: vpid, Sig: int(unix.SIGUSR1)},
				{Name: "kill0-victim", Call: "kill", Pid: vpid},
				{Name: "killpg-victim", Call: "kill", Pid: -vpid, Sig: int(unix.SIGUSR1)},
				{Name: "killall0", Call: "kill", Pid: -1},
				{Name: "killpg-gone", Call: "kill", Pid: -gonePgid, Sig: int(unix.SIGUSR1)},
				{Name: "prlimit-victim", Call: "prlimit", Pid: vpid},
				{Name: "pidfd-victim", Call: "pidfd-kill", Pid: vpid, Sig: int(unix.SIGUSR1)},
				{Name: "kill0-self", Call: "kill", Pid: -2},
				{Name: "prlimit-self", Call: "prlimit", Pid: -2},
				{Name: "kill-child", Call: "kill-child", Sig: int(unix.SIGTERM)},
				{Name: "pidfd-child", Call: "pidfd-kill", Sig: int(unix.SIGTERM)},
				{Name: "tgkill-child", Call: "tgkill", Sig: int(unix.SIGTERM)},
				{Name: "sigqueue-child", Call: "sigqueue", Sig: int(unix.SIGTERM)},
				{Name: "tgkill-victim", Call: "tgkill", Pid: vpid, Sig: int(unix.SIGUSR1)},
				{Name: "sigqueue-victim", Call: "sigqueue", Pid: vpid, Sig: int(unix.SIGUSR1)},
			}, runOpts{confined: true, cfg: cfg, withInit: true})
			want := map[string]string{
				"kill-victim": "EPERM", "kill0-victim": "EPERM", "killpg-victim": "EPERM", "killall0": "ESRCH", "killpg-gone": "ESRCH",
				"prlimit-victim": "EPERM", "pidfd-victim": "EPERM",
				"kill0-self": "OK", "prlimit-self": "OK", "kill-child": "OK", "pidfd-child": "OK",
				"tgkill-child": "OK", "sigqueue-child": "OK", "tgkill-victim": "EPERM", "sigqueue-victim": "EPERM",
			}
			if !kernelHasPidfdThread() {
				// The supervisor signals another process's thread only
				// through a PIDFD_THREAD pidfd, and refuses without one.
				t.Logf("tgkill-child: this kernel has no PIDFD_THREAD (Linux 6.9+), so the supervisor refuses a signal to another process's thread: want EPERM")
				want["tgkill-child"] = "EPERM"
			}
			for _, r := range res {
				if r.Err != want[r.Name] {
					t.Errorf("%s: %s, want %s", r.Name, r.Err, want[r.Name])
				}
				if strings.HasSuffix(r.Name, "-child") && want[r.Name] == "OK" && r.Byte != "terminated" {
					t.Errorf("%s: child ended %q, want by SIGTERM", r.Name, r.Byte)
				}
			}
			if !testAlive(vpid) {
				t.Fatalf("the victim was killed")
			}
			if l, _ := os.ReadFile("/proc/" + strconv.Itoa(vpid) + "/limits"); strings.Contains(string(l), " 77 ") {
				t.Errorf("the victim's limit was changed:\n%s", l)
			}
			var reasons []string
			for _, d := range stats.Denials() {
				reasons = append(reasons, d.Syscall+": "+d.Reason)
			}
			for _, w := range []string{"kill: pid " + strconv.Itoa(vpid) + " is not a process of this run",
				"prlimit64: names another process", "pidfd_send_signal: the pidfd names pid",
				"kill: process group " + strconv.Itoa(vpid) + " is outside this run"} {
				found := false
				for _, r := range reasons {
					found = found || strings.HasPrefix(r, w)
				}
				if !found {
					t.Errorf("no denial %q recorded; got %q", w, reasons)
				}
			}
		})
	}
}

func testAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// TestMember checks the membership walk on a real tree: an init (sh)
// with a child and a grandchild; the test's own processes and the init
// itself are not members; a reaped member's pidfd is not one either.
func TestMember(t *testing.T) {
	init := exec.Command("/bin/sh", "-c", `sleep 100 & sh -c 'sleep 100 & wait' & wait`)
	init.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := init.Start(); err != nil {
		t.Fatal(err)
	}
	ipid := init.Process.Pid
	defer func() {
		proctree.Signal(ipid, unix.SIGKILL)
		_ = init.Process.Kill()
		_ = init.Wait()
	}()
	ifd, err := unix.PidfdOpen(ipid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ifd)
	pol := policy{init: &Init{Pid: ipid, Pidfd: ifd}}

	var ds []int
	for deadline := time.Now().Add(10 * time.Second); len(ds) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ds, _ = proctree.Descendants(ipid)
	}
	if len(ds) < 3 {
		t.Fatalf("tree not up: descendants %v", ds)
	}
	outsider := exec.Command("/bin/sleep", "100")
	if err := outsider.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = outsider.Process.Kill(); _ = outsider.Wait() }()

	check := func(pid int, want bool) {
		t.Helper()
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatalf("pidfd_open(%d): %v", pid, err)
		}
		defer unix.Close(fd)
		if got := pol.member(fd, pid); got != want {
			t.Errorf("member(%d) = %v, want %v", pid, got, want)
		}
	}
	for _, d := range ds {
		check(d, true)
	}
	check(ipid, false)
	check(os.Getpid(), false)
	check(outsider.Process.Pid, false)
	check(1, false)

	// A member that is gone: its pidfd is stale, whatever its number
	// names later. (A leaf: a killed sh would orphan its sleep.)
	leaf := -1
	for _, d := range ds {
		if c, _ := os.ReadFile("/proc/" + strconv.Itoa(d) + "/comm"); string(c) == "sleep\n" {
			leaf = d
		}
	}
	if leaf < 0 {
		t.Fatalf("no sleep among %v", ds)
	}
	fd, err := unix.PidfdOpen(leaf, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); exists(fd) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
	}
	if exists(fd) {
		t.Fatalf("killed member %d still exists", leaf)
	}
	if pol.member(fd, leaf) {
		t.Errorf("a reaped member's pidfd counts as a member")
	}
	// Without an init nothing is a member.
	if (&policy{}).member(fd, ds[1]) {
		t.Errorf("member without an init")
	}
}
