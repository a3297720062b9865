//go:build linux

// Package testutil holds helpers for tests that really spawn: running the
// CLI as root and as an unprivileged uid, making work directories that uid
// owns, and checking that processes are gone.
package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/fixture"
)

// NobodyUID is the unprivileged uid tests drop to when they run as root.
const NobodyUID = 65534

// CLIEnv, when set in a test binary's environment, makes TestMain act as
// the confine CLI (see RunMainAsCLI).
const CLIEnv = "CONFINE_TEST_AS_CLI"

// User is one identity a test runs the CLI as.
type User struct {
	Name string
	UID  int
}

// Users returns root and nobody when the test runs as root, otherwise the
// current uid alone (and says so).
func Users(t testing.TB) []User {
	if os.Geteuid() == 0 {
		return []User{{"root", 0}, {"nobody", NobodyUID}}
	}
	t.Logf("not root: running as uid %d only (the unprivileged-uid matrix needs root to drop to uid %d)", os.Geteuid(), NobodyUID)
	return []User{{"self", os.Geteuid()}}
}

var (
	unusedOnce sync.Once
	unusedUID  int
	unusedErr  error
)

// UnusedUID is an unprivileged uid that no process on this host runs as
// (real, effective, saved or file-system uid in /proc/*/status) and that
// /etc/passwd does not name, chosen once per test process: 1<<30 plus
// k<<22 plus the test process's pid, for the first k = 0, 1, ... that is
// unused. pid_max is at most 1<<22, so concurrent test processes, whose
// pids differ, never choose the same uid. A test whose bound counts every
// task of a uid host-wide (RLIMIT_NPROC) runs as it when the test runs as
// root: other processes of NobodyUID (another test run, a daemon) would
// count against that bound. Only root can switch to it.
func UnusedUID(t testing.TB) int {
	t.Helper()
	unusedOnce.Do(func() {
		var used map[int]bool
		if used, unusedErr = usedUIDs(); unusedErr == nil {
			unusedUID, unusedErr = pickUID(os.Getpid(), used)
		}
	})
	if unusedErr != nil {
		t.Fatalf("choosing an unused uid: %v", unusedErr)
	}
	return unusedUID
}

// usedUIDs is every uid /etc/passwd names or a process runs as.
func usedUIDs() (map[int]bool, error) {
	used := map[int]bool{}
	if b, err := os.ReadFile("/etc/passwd"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Split(line, ":"); len(f) > 2 {
				if n, err := strconv.Atoi(f[2]); err == nil {
					used[n] = true
				}
			}
		}
	}
	procs, err := filepath.Glob("/proc/[0-9]*/status")
	if err != nil {
		return nil, fmt.Errorf("listing /proc: %w", err)
	}
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				for _, f := range strings.Fields(rest) {
					if n, err := strconv.Atoi(f); err == nil {
						used[n] = true
					}
				}
				break
			}
		}
	}
	return used, nil
}

// pickUID is UnusedUID's choice for pid among the uids not in used.
func pickUID(pid int, used map[int]bool) (int, error) {
	for k := 0; k < 64; k++ {
		if uid := 1<<30 + k<<22 + pid; !used[uid] {
			return uid, nil
		}
	}
	return 0, fmt.Errorf("every candidate uid 1<<30 + k<<22 + %d (k < 64) is in use", pid)
}

var (
	shareOnce sync.Once
	shareDir  string
	shareErr  error
)

// SharedDir is a 0755 directory for the whole test process, readable by any
// uid (t.TempDir is 0700 to root).
func SharedDir(t testing.TB) string {
	shareOnce.Do(func() {
		shareDir, shareErr = os.MkdirTemp("", "confine-test-")
		if shareErr == nil {
			shareErr = os.Chmod(shareDir, 0o755)
		}
	})
	if shareErr != nil {
		t.Fatalf("shared dir: %v", shareErr)
	}
	return shareDir
}

// RemoveSharedDir removes SharedDir (and the test binary copied there),
// if this process made one. For TestMain, after m.Run.
func RemoveSharedDir() {
	StopServers()
	if shareDir != "" {
		_ = os.RemoveAll(shareDir)
	}
}

// Workdir returns a fresh directory owned by uid inside SharedDir.
func Workdir(t testing.TB, uid int) string {
	d, err := os.MkdirTemp(SharedDir(t), "wd-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && uid != 0 {
		if err := os.Chown(d, uid, uid); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// SelfBinary is a copy of the running test binary in a directory every uid
// can read, so it can be re-executed as an unprivileged uid.
func SelfBinary(t testing.TB) string {
	binOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(SharedDir(t), "confine.test")
		binErr = CopyFile(exe, binPath, 0o755)
	})
	if binErr != nil {
		t.Fatalf("copy test binary: %v", binErr)
	}
	return binPath
}

// CopyExecutable copies src into SharedDir and returns the new path.
func CopyExecutable(t testing.TB, src string) string {
	dst := filepath.Join(SharedDir(t), filepath.Base(src))
	if err := CopyFile(src, dst, 0o755); err != nil {
		t.Fatal(err)
	}
	return dst
}

// CopyFile copies the regular file src to dst, created (or truncated)
// with mode. It is the one copy the test harnesses share (escape/,
// internal/notify's, this package's); the library's seed copy (internal/warmcache)
// is stricter and separate.
func CopyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	return out.Close()
}

// Result is a finished CLI run.
type Result struct {
	Stdout, Stderr string
	Code           int
	MaxRSSKB       int64
	Elapsed        time.Duration
}

// CLI is a configured invocation of the confine CLI (the test binary acting
// as it).
type CLI struct {
	Bin  string
	UID  int
	Dir  string
	Env  []string
	Args []string
	// Container runs the CLI as in a stock Docker container (see
	// SimulateContainerEnv, which sets it for every CLI). The binary's
	// TestMain must call WrapContainer first.
	Container bool
}

// Command builds the exec.Cmd without starting it.
func (c CLI) Command() *exec.Cmd {
	cmd := exec.Command(c.Bin, c.viaServerArgs()...)
	cmd.Dir = c.Dir
	// Tests that want the event log name one; others keep it off the
	// home directory.
	cmd.Env = append([]string{CLIEnv + "=1", "PATH=/usr/local/bin:/usr/bin:/bin", "CONFINE_EVENT_LOG=off"}, c.Env...)
	if c.Container || SimulatingContainer() {
		cmd.Env = append(cmd.Env, wrapEnv+"=1")
	}
	// A simulated Landlock ABI (builds with -tags confine_simabi) reaches
	// the CLI; release builds ignore the variable.
	if v, ok := os.LookupEnv("CONFINE_SIM_LANDLOCK_ABI"); ok {
		cmd.Env = append(cmd.Env, "CONFINE_SIM_LANDLOCK_ABI="+v)
	}
	if os.Geteuid() == 0 && c.UID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(c.UID), Gid: uint32(c.UID)}}
	}
	return cmd
}

// StartReady starts cmd and waits for the file ready, which the command
// writes once it is set up. When the file never comes it kills cmd, reaps
// it, and fails the test with what.
func StartReady(t testing.TB, cmd *exec.Cmd, ready, what string) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !Await(func() bool { _, err := os.Stat(ready); return err == nil }) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal(what)
	}
}

// Run runs the CLI to completion.
func (c CLI) Run(t testing.TB) Result {
	t.Helper()
	cmd := c.Command()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Elapsed: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		r.Code = ee.ExitCode()
	default:
		t.Fatalf("run CLI: %v", err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.MaxRSSKB = ru.Maxrss
	}
	return r
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool {
	if err := unix.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// ReadPids reads whitespace-separated pids from a file.
func ReadPids(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		p, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("bad pid %q in %s", f, path)
		}
		pids = append(pids, p)
	}
	return pids, nil
}

// WaitFor polls cond until it holds or limit passes (fixture.WaitFor).
// It is a liveness bound for events another process causes, not a timing
// assertion.
func WaitFor(limit time.Duration, cond func() bool) bool { return fixture.WaitFor(limit, cond) }

// Patience is how long a test waits for an event that must come (a file a
// run writes, a process that must end, a socket that must appear). It only
// bounds how long a broken run hangs before the test fails: a passing test
// waits for the event, however loaded the machine, never for this.
const Patience = 3 * time.Minute

// Await polls cond until it holds, for at most Patience.
func Await(cond func() bool) bool { return fixture.WaitFor(Patience, cond) }

// TokenEnv is the variable a test gives a run (--env TokenEnv=TOKEN, or
// in CommandSpec.Env) to find its processes again with TokenPids: pids the
// command writes down are those of its own PID namespace under the
// landlock+namespaces provider, which mean nothing (or another process)
// outside it.
const TokenEnv = "CONFINE_TEST_MARK"

// NewToken returns a fresh token for TokenEnv.
func NewToken() string {
	var b [8]byte
	f, err := os.Open("/dev/urandom")
	if err == nil {
		_, _ = io.ReadFull(f, b[:])
		f.Close()
	}
	return fmt.Sprintf("run-%x-%d", b, time.Now().UnixNano())
}

// TokenPids returns the live (not zombie) processes, as this test sees
// them, whose environment holds TokenEnv=token.
func TokenPids(token string) []int {
	want := []byte(TokenEnv + "=" + token + "\x00")
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := readEnviron(pid)
		if err != nil || !bytes.HasPrefix(b, want) && !bytes.Contains(b, append([]byte{0}, want...)) {
			continue
		}
		if Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// readEnviron reads /proc/PID/environ. Root without CAP_SYS_PTRACE (a
// real Docker container) may not read another uid's; the process's own uid
// may, so then a cat(1) running as that uid reads it.
func readEnviron(pid int) ([]byte, error) {
	path := "/proc/" + strconv.Itoa(pid) + "/environ"
	b, err := os.ReadFile(path)
	if !errors.Is(err, os.ErrPermission) || os.Geteuid() != 0 {
		return b, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil || st.Uid == 0 {
		return nil, err
	}
	cmd := exec.Command("/bin/cat", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: st.Uid, Gid: st.Gid}}
	return cmd.Output()
}

// Comm is the command name of pid ("" when gone).
func Comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
