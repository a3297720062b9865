//go:build linux

package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/confine-sandbox/confine"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/selftest"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

func TestMain(m *testing.M) {
	confine.Init()
	testutil.WrapContainer(false)
	// `__probe` too: the selftest runs this binary's copy as the probe
	// with an environment of its own.
	if os.Getenv(testutil.CLIEnv) == "1" || len(os.Args) > 1 && os.Args[1] == selftest.ProbeCommand {
		os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	testutil.RemoveSharedDir()
	os.Exit(code)
}

func cli(t *testing.T, u testutil.User, wd string, args ...string) testutil.Result {
	t.Helper()
	return testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: args}.Run(t)
}

func TestExitStatus(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			noexec := filepath.Join(wd, "noexec.sh")
			if err := os.WriteFile(noexec, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name   string
				args   []string
				code   int
				stderr string
			}{
				{"success", []string{"run", "--", "true"}, 0, ""},
				{"own status", []string{"run", "--", "sh", "-c", "exit 3"}, 3, ""},
				{"signal", []string{"run", "--", "sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
				// The supervisor ignores SIGINT; the command must not.
				{"sigint", []string{"run", "--", "sh", "-c", "kill -INT $$; exit 9"}, 128 + 2, ""},
				{"timeout", []string{"run", "--timeout", "1s", "--", "sleep", "30"}, 124, "timed out"},
				{"not found", []string{"run", "--", "/nonexistent"}, 127, "not found"},
				{"not found in PATH", []string{"run", "--", "no-such-program-xyz"}, 127, "not found"},
				{"not executable", []string{"run", "--", noexec}, 126, "not an executable"},
				{"bad flag", []string{"run", "--bogus", "--", "true"}, 125, "unknown flag"},
				{"bad size", []string{"run", "--output-limit", "12XB", "--", "true"}, 125, "invalid size"},
				{"bad duration", []string{"run", "--timeout", "soon", "--", "true"}, 125, "invalid duration"},
				{"missing workdir", []string{"run", "--workdir", "/nonexistent/dir", "--", "true"}, 125, "not an existing directory"},
				{"no program", []string{"run"}, 125, "needs a PROGRAM"},
				{"unknown profile", []string{"run", "--profile", "nope", "--", "true"}, 125, "unknown profile"},
				{"unset env", []string{"run", "--env", "CONFINE_SURELY_UNSET", "--", "true"}, 125, "not set"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					r := cli(t, u, wd, tt.args...)
					if r.Code != tt.code {
						t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, tt.code, r.Stdout, r.Stderr)
					}
					if tt.stderr != "" && !strings.Contains(r.Stderr, tt.stderr) {
						t.Fatalf("stderr %q does not mention %q", r.Stderr, tt.stderr)
					}
				})
			}
		})
	}
}

func TestJSONResult(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	r := cli(t, u, wd, "run", "--json", "--", "sh", "-c", "echo out; echo err >&2; exit 4")
	if r.Code != 4 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	var res map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, r.Stdout)
	}
	for _, k := range []string{"exit_code", "stdout", "stderr", "duration_ns", "timed_out", "cancelled", "killed", "usage", "backend", "guarantees"} {
		if _, ok := res[k]; !ok {
			t.Errorf("field %q missing from %s", k, r.Stdout)
		}
	}
	var typed spec.CommandResult
	if err := json.Unmarshal([]byte(r.Stdout), &typed); err != nil {
		t.Fatal(err)
	}
	if string(typed.Stdout.Head) != "out\n" || string(typed.Stderr.Head) != "err\n" || typed.ExitCode != 4 {
		t.Fatalf("unexpected result %+v", typed)
	}
}

// A 1 GiB flood: head and tail kept, every byte counted, and the launcher's
// memory bounded (the bar is 64 MiB).
func TestFlood(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	r := cli(t, u, wd, "run", "--json", "--output-limit", "1MiB", "--",
		"sh", "-c", "echo head-marker; head -c 1073741824 /dev/zero; echo tail-marker")
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	var res spec.CommandResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	s := res.Stdout
	if s.Total < 1<<30 || !s.Truncated {
		t.Fatalf("total %d truncated %v", s.Total, s.Truncated)
	}
	if !strings.HasPrefix(string(s.Head), "head-marker\n") || !strings.HasSuffix(string(s.Tail), "tail-marker\n") {
		t.Fatalf("head/tail markers missing: head %q... tail ...%q", s.Head[:min(20, len(s.Head))], s.Tail[max(0, len(s.Tail)-20):])
	}
	if int64(len(s.Head)+len(s.Tail)) > 1<<20 {
		t.Fatalf("kept %d bytes, limit 1MiB", len(s.Head)+len(s.Tail))
	}
	// Maxrss of the CLI covers its own peak and its reaped children's.
	if r.MaxRSSKB > 64<<10 {
		t.Fatalf("launcher peak RSS %d KiB exceeds 64 MiB", r.MaxRSSKB)
	}
	t.Logf("1 GiB flood: %v, peak RSS %d KiB", r.Elapsed, r.MaxRSSKB)
}

// The done-when: a setsid'd grandchild and a sleeping parent end
// with exit 124 and nothing of the run left alive.
func TestTimeoutKillsSetsidDaemon(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			// 2 s finds both pids written on an idle host; where the
			// deadline came first (a loaded host), the run is made again
			// with twice the timeout: what it must end was not started.
			var r testutil.Result
			var tok string
			for timeout := 2 * time.Second; ; timeout *= 2 {
				_ = os.Remove(filepath.Join(wd, "pids"))
				tok = testutil.NewToken()
				r = cli(t, u, wd, "run", "--timeout", timeout.String(), "--kill-grace", "500ms", "--env", testutil.TokenEnv+"="+tok, "--", "sh", "-c",
					`setsid sh -c 'sleep 300 & echo $! >> pids; wait' & echo $! >> pids; sleep 300`)
				if p, _ := testutil.ReadPids(filepath.Join(wd, "pids")); len(p) >= 2 || r.Code != 124 || timeout >= 64*time.Second {
					break
				}
				t.Logf("the %v deadline came before both pids were written: again with twice the timeout", timeout)
				var left []int
				testutil.Await(func() bool { left = testutil.TokenPids(tok); return len(left) == 0 })
				for _, p := range left {
					_ = syscall.Kill(p, syscall.SIGKILL) // ours: it carries the run's token
				}
				if len(left) > 0 {
					t.Fatalf("processes of the run survived its timeout: %v", left)
				}
			}
			if r.Code != 124 {
				t.Fatalf("exit %d, want 124: %s", r.Code, r.Stderr)
			}
			// The sleeps are 300 s: a run that lasted that long waited
			// for them (not a speed check; a loaded host may be slow).
			if r.Elapsed >= 300*time.Second {
				t.Errorf("took %v for its timeout: the run waited for its sleeps", r.Elapsed)
			}
			assertGone(t, filepath.Join(wd, "pids"), 2, tok)
		})
	}
}

// assertGone checks that the run that wrote at least want pids into
// pidfile left no process alive: it finds them by the run's token, since
// the pids are those of the run's PID namespace when it had one.
func assertGone(t *testing.T, pidfile string, want int, token string) {
	t.Helper()
	pids, err := testutil.ReadPids(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	if len(pids) < want {
		t.Fatalf("only %d pids recorded, want %d", len(pids), want)
	}
	var left []int
	testutil.Await(func() bool { left = testutil.TokenPids(token); return len(left) == 0 })
	for _, p := range left {
		t.Errorf("pid %d (%s) survived the run", p, testutil.Comm(p))
		_ = syscall.Kill(p, syscall.SIGKILL) // ours: it carries the run's token
	}
}

func TestLauncherSIGKILLLeavesNoSurvivor(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			tok := testutil.NewToken()
			c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: []string{"run", "--env", testutil.TokenEnv + "=" + tok, "--", "sh", "-c",
				`setsid sh -c 'sleep 300 & echo $! >> pids; wait' & echo $! >> pids; sleep 300 & echo $! >> pids; echo ready > ready; wait`}}
			cmd := c.Command()
			testutil.StartReady(t, cmd, filepath.Join(wd, "ready"), "command never became ready")
			// Let the setsid'd grandchild record its pid.
			testutil.Await(func() bool { p, _ := testutil.ReadPids(filepath.Join(wd, "pids")); return len(p) >= 3 })
			// The shell, the setsid'd shell and the two sleeps.
			// A process in the middle of its execve can be missed by one
			// scan of /proc (its environ is briefly unreadable): look again.
			var live []int
			testutil.Await(func() bool { live = testutil.TokenPids(tok); return len(live) >= 4 })
			if len(live) < 4 {
				t.Fatalf("only %d processes of the run alive before the kill: %v", len(live), live)
			}
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			pids, _ := testutil.ReadPids(filepath.Join(wd, "pids"))
			if len(pids) < 3 {
				t.Fatalf("pids recorded: %v", pids)
			}
			gone := testutil.Await(func() bool { return len(testutil.TokenPids(tok)) == 0 })
			if !gone {
				assertGone(t, filepath.Join(wd, "pids"), 3, tok)
			}
		})
	}
}

// A 200-process tree, a third of it setsid'd, is gone when the run is
// ended. The run is ended by SIGTERM to confine once all 200 are started,
// not by a deadline: a deadline long enough for a loaded host to start
// them all cost every run its full length (30 s), and one too short ended
// the run before they were. SIGTERM and the deadline end a run the same
// way (proctree.Supervise: Terminate, then Kill after the grace); the
// deadline itself is TestTimeoutKillsSetsidDaemon's.
func TestTreeOf200GoneWhenEnded(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	script := `i=0; while [ $i -lt 200 ]; do
  if [ $((i % 3)) -eq 0 ]; then setsid sleep 300 & else sleep 300 & fi
  echo $! >> pids; i=$((i+1)); done; echo ready > ready; wait`
	tok := testutil.NewToken()
	c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd,
		Args: []string{"run", "--kill-grace", "200ms", "--env", testutil.TokenEnv + "=" + tok, "--", "sh", "-c", script}}
	cmd := c.Command()
	testutil.StartReady(t, cmd, filepath.Join(wd, "ready"), "the 200 processes were never all started")
	_ = cmd.Process.Signal(syscall.SIGTERM) // confine, ours
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGINT) {
		t.Fatalf("confine after SIGTERM: %v, want exit %d", err, 128+int(syscall.SIGINT))
	}
	assertGone(t, filepath.Join(wd, "pids"), 200, tok)
}

func TestDaemonLeftAfterSuccessIsKilled(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	tok := testutil.NewToken()
	r := cli(t, u, wd, "run", "--json", "--env", testutil.TokenEnv+"="+tok, "--", "sh", "-c",
		`setsid sh -c 'sleep 300 & echo $! >> pids; wait' & while [ ! -s pids ]; do sleep 0.01; done; exit 0`)
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	var res spec.CommandResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Survivors == 0 || !res.Killed {
		t.Errorf("survivors %d killed %v: the daemon should have been reported", res.Survivors, res.Killed)
	}
	assertGone(t, filepath.Join(wd, "pids"), 1, tok)
}

// The CLI returns before the run's private directory is removed (the
// run's init does it): whether the command left it empty (rmdir) or full
// of files it made unreadable to itself (rm -rf), it is gone shortly.
func TestPrivateDirRemovedAfterReturn(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			for _, tc := range []struct{ name, script string }{
				{"untouched", `echo "$TMPDIR"`},
				{"filled", `echo "$TMPDIR"; mkdir -p "$HOME/.cache/a" "$TMPDIR/b"; echo x > "$TMPDIR/b/f"; chmod 0 "$HOME/.cache" "$TMPDIR/b"`},
			} {
				r := cli(t, u, wd, "run", "--", "sh", "-c", tc.script)
				tmp := strings.TrimSpace(r.Stdout)
				if r.Code != 0 || !strings.HasPrefix(tmp, "/") {
					t.Fatalf("%s: exit %d, stdout %q: %s", tc.name, r.Code, r.Stdout, r.Stderr)
				}
				root := filepath.Dir(tmp)
				var err error
				for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
					if _, err = os.Lstat(root); os.IsNotExist(err) {
						break
					}
				}
				if !os.IsNotExist(err) {
					t.Errorf("%s: private directory %s still there 5s after the run (%v)", tc.name, root, err)
					os.RemoveAll(root)
				}
			}
		})
	}
}

func TestStdinAndLiveOutput(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: []string{"run", "--output-limit", "5", "--", "sh", "-c", "cat; echo 0123456789"}}
	cmd := c.Command()
	cmd.Stdin = strings.NewReader("in\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v", err)
	}
	if string(out) != "in\n01" {
		t.Fatalf("live output %q, want the first 5 bytes %q", out, "in\n01")
	}
}

func TestVersionAndHelp(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	for _, args := range [][]string{{"version"}, {"--help"}, {"run", "--help"}, {"check", "--help"}, {"completion", "bash"}} {
		r := cli(t, u, wd, args...)
		if r.Code != 0 || r.Stdout == "" {
			t.Errorf("%v: exit %d, stdout %d bytes, stderr %s", args, r.Code, len(r.Stdout), r.Stderr)
		}
	}
	_ = fmt.Sprint()
}

// 50 concurrent runs append whole lines to one event log; no line carries an
// environment value; inspect finds the runs again.
func TestEventLogConcurrentAndInspect(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	// Outside the work directory: a run refuses a writable root that
	// holds its own event log (docs/control-plane.md).
	logPath := filepath.Join(testutil.Workdir(t, u.UID), "events.jsonl")
	const n = 50
	errs := make(chan string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd,
				Args: []string{"run", "--event-log", logPath, "--env", "CONFINE_PLAIN=hunter2-value", "--", "sh", "-c", fmt.Sprintf("echo %d", i)}}
			if r := c.Run(t); r.Code != 0 {
				errs <- fmt.Sprintf("run %d: exit %d: %s", i, r.Code, r.Stderr)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") {
		t.Fatal("an environment value reached the event log")
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("%d lines, want %d", len(lines), n)
	}
	var last map[string]any
	for _, l := range lines {
		if err := json.Unmarshal([]byte(l), &last); err != nil {
			t.Fatalf("not a JSON line: %v: %q", err, l)
		}
	}
	r := cli(t, u, wd, "inspect", "--event-log", logPath, "--last", "1", "--json")
	var evs []map[string]any
	if err := json.Unmarshal([]byte(r.Stdout), &evs); err != nil || len(evs) != 1 {
		t.Fatalf("inspect --last 1 --json: %v: %s %s", err, r.Stdout, r.Stderr)
	}
	for _, k := range []string{"backend", "layers", "guarantees", "run_id", "env_names"} {
		if _, ok := evs[0][k]; !ok {
			t.Errorf("inspect output lacks %q", k)
		}
	}
	id, _ := evs[0]["run_id"].(string)
	if r := cli(t, u, wd, "inspect", "--event-log", logPath, "--id", id); r.Code != 0 || !strings.Contains(r.Stdout, id) {
		t.Errorf("inspect --id %s: exit %d: %s %s", id, r.Code, r.Stdout, r.Stderr)
	}
}
