//go:build linux

package confine_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

func TestMain(m *testing.M) {
	confine.Init()
	// In a simulated container the whole test binary (the launcher of
	// these in-process runs) is under the namespace-blocking filter.
	testutil.WrapContainer(true)
	os.Exit(m.Run())
}

func mint(t *testing.T, profile string, ttl time.Duration) (*policy.Engine, *policy.Cap) {
	t.Helper()
	e, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.Mint(profile, "test", ttl)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}

func worktree(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func shSpec(wt, script string) spec.CommandSpec {
	return spec.CommandSpec{Program: "/bin/sh", Args: []string{"-c", script}, Worktree: wt, Env: []string{"LANG=C.UTF-8"}}
}

func TestRunCommand(t *testing.T) {
	_, c := mint(t, "default", 0)
	wt := worktree(t)
	res, err := confine.RunCommand(context.Background(), c, shSpec(wt, "echo hello; echo oops >&2; exit 7"))
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout.Head) != "hello\n" || string(res.Stderr.Head) != "oops\n" {
		t.Fatalf("unexpected result: %+v", res)
	}
	if res.Backend != confine.Backend && res.Backend != confine.BackendNamespaces || len(res.Guarantees) != len(spec.Guarantees()) {
		t.Fatalf("backend %q, %d guarantees", res.Backend, len(res.Guarantees))
	}
	for _, g := range res.Guarantees {
		if g.Mechanism == "" && !g.Waived {
			t.Errorf("guarantee %s has no mechanism", g.Name)
		}
	}
}

// A library caller can ask for bubblewrap: it runs the command (signal and
// exit status as under the other backends), or, where bwrap is missing or
// user namespaces are blocked, refuses with ErrUnavailable and the reason.
func TestBubblewrapBackend(t *testing.T) {
	_, c := mint(t, "default", 0)
	l := &confine.Launcher{Backend: "bwrap"}
	res, err := l.RunCommand(context.Background(), c, shSpec(t.TempDir(), "echo in-bwrap; kill -TERM $$"))
	if err != nil {
		if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), "bubblewrap") {
			t.Fatalf("refusal: %v, want ErrUnavailable naming bubblewrap", err)
		}
		if _, lerr := exec.LookPath("bwrap"); lerr == nil && !testutil.SimulatingContainer() {
			t.Logf("bwrap is installed but refused here (%s): %v", testutil.Mode(), err)
		}
		t.Skipf("bubblewrap unavailable (%s): %v", testutil.Mode(), err)
	}
	if res.Backend != confine.BackendBubblewrap || string(res.Stdout.Head) != "in-bwrap\n" || res.Signal != int(syscall.SIGTERM) {
		t.Fatalf("backend %q stdout %q exit %d signal %d stderr %q", res.Backend, res.Stdout.Head, res.ExitCode, res.Signal, res.Stderr.Head)
	}
	if testutil.SimulatingContainer() {
		t.Errorf("bubblewrap ran in the simulated container, where user namespaces are blocked")
	}
}

// A refused capability must refuse before anything is spawned: the command
// would leave a marker file.
func TestCapabilityRefusals(t *testing.T) {
	eng, good := mint(t, "default", 0)
	_, expiring := mint(t, "default", time.Nanosecond)
	revoked, _ := eng.Mint("default", "test", 0)
	eng.Revoke(revoked)
	time.Sleep(time.Millisecond)
	tests := []struct {
		name    string
		cap     *policy.Cap
		profile string
	}{
		{"nil", nil, ""},
		{"forged zero value", &policy.Cap{}, ""},
		{"expired", expiring, ""},
		{"revoked", revoked, ""},
		{"mismatched profile", good, "other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := worktree(t)
			s := shSpec(wt, "touch marker")
			s.Profile = tt.profile
			_, err := confine.RunCommand(context.Background(), tt.cap, s)
			if !errors.Is(err, spec.ErrCapability) {
				t.Fatalf("err = %v, want ErrCapability", err)
			}
			if _, err := os.Stat(filepath.Join(wt, "marker")); err == nil {
				t.Fatal("command ran despite the refused capability")
			}
		})
	}
}

func TestSpecRefusals(t *testing.T) {
	_, c := mint(t, "default", 0)
	wt := worktree(t)
	tests := []struct {
		name string
		mut  func(*spec.CommandSpec)
		want error
	}{
		{"empty program", func(s *spec.CommandSpec) { s.Program = "" }, spec.ErrInvalidSpec},
		{"relative worktree", func(s *spec.CommandSpec) { s.Worktree = "rel" }, spec.ErrInvalidSpec},
		{"dir outside worktree", func(s *spec.CommandSpec) { s.Dir = "/tmp" }, spec.ErrInvalidSpec},
		{"unclean dir", func(s *spec.CommandSpec) { s.Dir = wt + "/../x" }, spec.ErrInvalidSpec},
		{"bad env", func(s *spec.CommandSpec) { s.Env = []string{"NOEQUALS"} }, spec.ErrInvalidSpec},
		{"allowlist network", func(s *spec.CommandSpec) { s.Network = "allowlist" }, spec.ErrInvalidSpec},
		{"negative limit", func(s *spec.CommandSpec) { s.Limits.MemoryBytes = -1 }, spec.ErrInvalidSpec},
		{"missing program", func(s *spec.CommandSpec) { s.Program = "/nonexistent" }, spec.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := shSpec(wt, "true")
			tt.mut(&s)
			if _, err := confine.RunCommand(context.Background(), c, s); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestCancelEndsTree(t *testing.T) {
	_, c := mint(t, "default", 0)
	wt := worktree(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for {
			if _, err := os.Stat(filepath.Join(wt, "ready")); err == nil {
				cancel()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	s := shSpec(wt, `setsid sleep 300 & echo $! > pid; touch ready; wait`)
	tok := testutil.NewToken()
	s.Env = append(s.Env, testutil.TokenEnv+"="+tok)
	s.Limits.KillGrace = 100 * time.Millisecond
	res, err := confine.RunCommand(ctx, c, s)
	if !errors.Is(err, context.Canceled) || !res.Cancelled || !res.Killed {
		t.Fatalf("err %v cancelled %v killed %v", err, res.Cancelled, res.Killed)
	}
	b, _ := os.ReadFile(filepath.Join(wt, "pid"))
	var pid int
	if _, err := fmt.Sscan(string(b), &pid); err != nil {
		t.Fatal(err)
	}
	// The pid is the run's own (a PID namespace's, under namespaces):
	// the survivors are found by the run's token.
	if left := testutil.TokenPids(tok); len(left) > 0 {
		for _, p := range left {
			_ = syscall.Kill(p, syscall.SIGKILL) // carries the run's token
		}
		t.Fatalf("pids %v survived cancellation", left)
	}
}

func TestUsageCoversOrphans(t *testing.T) {
	_, c := mint(t, "default", 0)
	wt := worktree(t)
	// The busy loop runs in a setsid'd orphan; its CPU must still count.
	s := shSpec(wt, `setsid sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; touch done' & wait; while [ ! -e done ]; do sleep 0.05; done`)
	res, err := confine.RunCommand(context.Background(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	if cpu := res.Usage.UserCPU + res.Usage.SysCPU; cpu < 50*time.Millisecond {
		t.Fatalf("tree CPU %v does not include the orphan's busy loop", cpu)
	}
	if res.Usage.MaxRSSKB == 0 {
		t.Fatal("max RSS not reported")
	}
}

// Many concurrent runs under a cap: all succeed, none leaks an fd or a temp dir.
func TestConcurrentRunsNoLeaks(t *testing.T) {
	_, c := mint(t, "default", 0)
	l := confine.NewLauncher(8)
	// Private temp dirs go to os.TempDir: one of this test's own, so that
	// runs of other test binaries do not change the count.
	tmp, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", tmp)
	before := countFDs(t)
	tmpBefore := countTempDirs(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wt := worktree(t)
			res, err := l.RunCommand(context.Background(), c, shSpec(wt, fmt.Sprintf("echo %d", i)))
			if err != nil {
				errs <- err
				return
			}
			if strings.TrimSpace(string(res.Stdout.Head)) != fmt.Sprint(i) {
				errs <- fmt.Errorf("run %d: stdout %q", i, res.Stdout.Head)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if after := countFDs(t); after > before+2 {
		t.Errorf("fds grew from %d to %d", before, after)
	}
	if after := countTempDirs(t); after != tmpBefore {
		t.Errorf("private temp dirs: %d before, %d after", tmpBefore, after)
	}
}

func countFDs(t *testing.T) int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func countTempDirs(t *testing.T) int {
	m, err := filepath.Glob(filepath.Join(os.TempDir(), "confine-*"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range m {
		if !strings.Contains(p, "confine-test-") {
			n++
		}
	}
	return n
}

func BenchmarkRunCommandTrue(b *testing.B) {
	e, _ := policy.NewEngine()
	c, _ := e.Mint("default", "bench", 0)
	wt, _ := filepath.EvalSymlinks(b.TempDir())
	s := spec.CommandSpec{Program: "/bin/true", Worktree: wt, Env: []string{"PATH=/usr/bin:/bin"}}
	for b.Loop() {
		if _, err := confine.RunCommand(context.Background(), c, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExecTrue is the unsandboxed baseline for BenchmarkRunCommandTrue.
func BenchmarkExecTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// The core provider (what a run gets inside a stock container), in the
// same process: no namespaces to create.
func BenchmarkRunCommandTrueCore(b *testing.B) {
	e, _ := policy.NewEngine()
	c, _ := e.Mint("default", "bench", 0)
	wt, _ := filepath.EvalSymlinks(b.TempDir())
	s := spec.CommandSpec{Program: "/bin/true", Worktree: wt, Env: []string{"PATH=/usr/bin:/bin"}}
	l := confine.NewLauncher(0)
	l.Backend = "core"
	for b.Loop() {
		if _, err := l.RunCommand(context.Background(), c, s); err != nil {
			b.Fatal(err)
		}
	}
}
