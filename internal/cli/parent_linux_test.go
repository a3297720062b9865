package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// TestDieWithParent: the caller of `confine run` is killed with SIGKILL
// (so it cannot end its run); with --die-with-parent nothing of the run
// is left, and the control shows that without it the run goes on. Under
// a seccomp filter that refuses pidfd_open (Docker's profiles before
// 20.10) the run still starts (the init's pidfd comes from the clone) and
// the parent is polled instead, with the same outcome.
func TestDieWithParent(t *testing.T) {
	for _, u := range testutil.Users(t) {
		for _, c := range []struct {
			name         string
			die, nopidfd bool
		}{{"die-with-parent", true, false}, {"die-with-parent-no-pidfd_open", true, true}, {"control", false, false}} {
			die := c.die
			t.Run(u.Name+"/"+c.name, func(t *testing.T) {
				wd := testutil.Workdir(t, u.UID)
				tok := testutil.NewToken()
				args := []string{"run"}
				var env []string
				if die {
					args = append(args, "--die-with-parent", "-v")
				}
				if c.nopidfd {
					env = []string{testutil.RefusePidfdOpenEnv + "=1"}
				}
				args = append(args, "--env", testutil.TokenEnv+"="+tok, "--", "sh", "-c", "echo ready > ready; sleep 300")
				cli := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: args, Env: env}
				if die {
					// How the parent is watched: the filter is in force and
					// the fallback taken, or a pidfd without it.
					want := "through a pidfd"
					if c.nopidfd {
						want = "by polling getppid() every 100ms (pidfd_open refused: operation not permitted)"
					}
					quick := cli
					quick.Args = []string{"run", "--die-with-parent", "-v", "--", "true"}
					if r := quick.Run(t); r.Code != 0 || !strings.Contains(r.Stderr, want) {
						t.Fatalf("run --die-with-parent -v -- true: exit %d, stderr %q; want 0 and %q", r.Code, r.Stderr, want)
					}
				}
				cmd := cli.Command()
				// The caller: a shell that starts confine in the background
				// and then only waits, as an agent would.
				cmd.Args = append([]string{"sh", "-c", `"$0" "$@" & echo $! > confine.pid; exec sleep 300`}, cmd.Args...)
				cmd.Path = "/bin/sh"
				testutil.StartReady(t, cmd, filepath.Join(wd, "ready"), "the command never became ready")
				killCaller := func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }
				pids, err := testutil.ReadPids(filepath.Join(wd, "confine.pid"))
				if err != nil || len(pids) != 1 {
					killCaller()
					t.Fatalf("confine's pid: %v %v", pids, err)
				}
				confinePid := pids[0]
				var live []int
				testutil.Await(func() bool { live = testutil.TokenPids(tok); return len(live) >= 2 })
				if len(live) < 2 {
					killCaller()
					t.Fatalf("only %d processes of the run alive before the caller's kill: %v", len(live), live)
				}
				killCaller()
				if die {
					if !testutil.Await(func() bool { return len(testutil.TokenPids(tok)) == 0 && !testutil.Alive(confinePid) }) {
						t.Errorf("after the caller's SIGKILL: confine alive %v, the run's processes %v", testutil.Alive(confinePid), testutil.TokenPids(tok))
					}
				} else {
					// The control: the run outlives its caller. Give the
					// watch that is not there the time it would have had.
					time.Sleep(time.Second)
					if !testutil.Alive(confinePid) || len(testutil.TokenPids(tok)) == 0 {
						t.Errorf("control: the run ended with its caller without --die-with-parent (confine alive %v)", testutil.Alive(confinePid))
					}
				}
				// Ours: its pid was written by the shell that started it.
				_ = syscall.Kill(confinePid, syscall.SIGTERM)
				if !testutil.Await(func() bool { return len(testutil.TokenPids(tok)) == 0 }) {
					t.Errorf("the run's processes outlived confine's SIGTERM: %v", testutil.TokenPids(tok))
				}
			})
		}
	}
}

// TestDieWithParentOutsideNamespace: a parent that cannot be watched refuses
// the run before anything starts.
func TestDieWithParentOutsideNamespace(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: unshare --pid makes the parent invisible")
	}
	if _, err := os.Stat("/usr/bin/unshare"); err != nil {
		t.Skip("unshare(1) is not installed")
	}
	wd := testutil.Workdir(t, 0)
	cmd := testutil.CLI{Bin: testutil.SelfBinary(t), Dir: wd, Args: []string{"run", "--die-with-parent", "--", "true"}}.Command()
	// In a new PID namespace confine is its init: getppid() is 0.
	cmd.Args = append([]string{"unshare", "--pid", "--fork", "--"}, cmd.Args...)
	cmd.Path = "/usr/bin/unshare"
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != ExitConfine {
		t.Fatalf("want exit %d, got %v: %s", ExitConfine, err, out)
	}
	if !strings.Contains(string(out), "outside this PID namespace") {
		t.Errorf("the refusal does not say why: %s", out)
	}
}
