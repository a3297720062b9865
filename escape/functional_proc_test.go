//go:build linux

package escape

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// TestFunctionalOwnProcesses: the rules for calls that name another
// process leave the run's own processes reachable. Under the core (no PID
// namespace; with a simulated ABI below 6 the supervisor handles the
// signals too), a command signals, renices and limits itself and its
// children as a build does.
func TestFunctionalOwnProcesses(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, sh := range []struct{ name, script, want string }{
				{"shell", shOwnProcesses, "shell ok\n"},
				{"python", pyOwnProcesses, "python ok\n"},
			} {
				t.Run(sh.name, func(t *testing.T) {
					argv := []string{"sh", "-c", sh.script}
					if sh.name == "python" {
						if _, err := lookPath("python3"); err != nil {
							t.Skipf("not applicable on this host: python3 missing (%v)", err)
						}
						argv = []string{"python3", "-c", sh.script}
					}
					e := newEnv(t, u, true)
					cli, env := coreRun(e)
					args := append([]string{"run", "--workdir", e.wd, "--timeout", "2m"}, cli...)
					args = append(append(args, "--"), argv...)
					o := cliRun(t, u, e.wd, env, args...)
					if o.code != 0 || !strings.Contains(o.stdout, sh.want) {
						t.Fatalf("own processes not reachable as %s: exit %d, want %q\nstdout: %s\nstderr: %s", u.Name, o.code, sh.want, o.stdout, o.stderr)
					}
					if strings.Contains(o.stderr, "denied") {
						t.Errorf("denials reported for the run's own processes:\n%s", o.stderr)
					}
					t.Logf("ok: %s", fx.OneLine(o.stdout, 200))
				})
			}
		})
	}
}

func lookPath(name string) (string, error) {
	for _, d := range filepath.SplitList("/usr/local/bin:/usr/bin:/bin") {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// shOwnProcesses kills its own background job and its own process group,
// and renices and limits itself.
const shOwnProcesses = `set -e
sleep 100 & kill $!; wait $! || true
sleep 100 & kill -TERM $!; wait $! || true
nice -n 5 true
ulimit -n 256
kill -0 $$
kill -0 0
echo shell ok`

// pyOwnProcesses goes through every call of the table with the run's own
// processes as targets.
const pyOwnProcesses = `import os, resource, signal, subprocess, threading, time
got = []
signal.signal(signal.SIGUSR2, lambda s, f: got.append(s))
os.kill(os.getpid(), signal.SIGUSR2)
signal.raise_signal(signal.SIGUSR2)
t = threading.Thread(target=lambda: time.sleep(0.5)); t.start()
signal.pthread_kill(t.ident, signal.SIGUSR2)
t.join()
os.kill(0, 0)
os.killpg(os.getpgid(0), 0)
resource.setrlimit(resource.RLIMIT_NOFILE, (200, 200))
resource.prlimit(os.getpid(), resource.RLIMIT_NOFILE, (150, 200))
os.nice(1)
cur = os.getpriority(os.PRIO_PROCESS, 0)
os.setpriority(os.PRIO_PROCESS, 0, cur + 1)
os.setpriority(os.PRIO_PROCESS, os.getpid(), cur + 2)
os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
p = subprocess.Popen(["sleep", "100"])
os.kill(p.pid, 0)
os.kill(-1, 0)
fd = os.pidfd_open(p.pid)
signal.pidfd_send_signal(fd, signal.SIGTERM)
assert p.wait() == -signal.SIGTERM
p = subprocess.Popen(["sleep", "100"], start_new_session=True)
os.killpg(p.pid, signal.SIGTERM)
assert p.wait() == -signal.SIGTERM
p = subprocess.Popen(["sleep", "100"])
os.kill(p.pid, signal.SIGKILL)
assert p.wait() == -signal.SIGKILL
time.sleep(0.1)
assert len(got) == 3, got
print("python ok")`
