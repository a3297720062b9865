//go:build linux

package escape

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// TestFunctionalForkUnderSupervisor: where the supervisor decides forks
// (uid 0 without a pids cgroup: the fork count) or signals (Landlock ABI
// below 6 without a PID namespace), a fork that a SIGCHLD reaches before
// the supervisor has received it must still succeed. dash installs its
// SIGCHLD handler without SA_RESTART, so before the supervisor added
// SA_RESTART to such handlers (internal/seccomp/sigchld.go), background
// jobs failed with "Cannot fork" and 2000 forks of the C program below
// saw dozens of EINTR. Run under the core with read-only cgroups, as in a
// stock container.
func TestFunctionalForkUnderSupervisor(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skipf("not applicable on this host: gcc missing (%v)", err)
	}
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			e := newEnv(t, u, true)
			for name, body := range map[string]string{"forkintr.c": cForkIntr} {
				p := filepath.Join(e.wd, name)
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				if os.Geteuid() == 0 {
					if err := os.Chown(p, u.UID, u.UID); err != nil {
						t.Fatal(err)
					}
				}
			}
			// The bound is not what this test is about: as a non-root uid
			// RLIMIT_NPROC counts every process of that uid on the host,
			// other tests' included.
			cli, env := coreRun(e)
			env = append(env, testutil.ReadOnlyCgroupEnv+"=1")
			script := `gcc -O2 -o forkintr forkintr.c && ./forkintr 2000 &&
for r in 1 2 3 4 5 6 7 8 9 10; do for i in 1 2 3 4 5 6 7 8; do sh -c "echo job" & done; wait; done | grep -c job`
			args := append([]string{"run", "--workdir", e.wd, "--timeout", "2m", "--max-procs", "4096"}, cli...)
			args = append(args, "--", "sh", "-c", script)
			o := cliRun(t, u, e.wd, env, args...)
			if o.code != 0 {
				t.Fatalf("exit %d\nstdout: %s\nstderr: %s", o.code, o.stdout, o.stderr)
			}
			// The supervisor sees rt_sigaction(SIGCHLD) only where it
			// decides forks (uid 0 here) or signals (ABI < 6).
			supervised := u.UID == 0
			if abi, _, err := landlock.ABI(); err == nil && abi < 6 {
				supervised = true // a kernel or a simulated ABI below 6
			}
			want := fmt.Sprintf("forks=2000 eintr=0 other=0 chld_restart=%d term_restart=0\n80\n", b2i(supervised))
			if o.stdout != want {
				t.Fatalf("as %s: stdout %q, want %q (EINTR from fork, a lost background job, or SA_RESTART where it was not asked for)\nstderr: %s", u.Name, o.stdout, want, o.stderr)
			}
			t.Logf("ok: %s", fx.OneLine(o.stdout, 200))
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cForkIntr forks N children that exit at once, with a SIGCHLD handler
// installed without SA_RESTART (as dash does) and a SIGTERM handler the
// supervisor must leave alone, then reports failed forks and the flags the
// kernel holds for both handlers.
const cForkIntr = `#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void h(int s) { (void)s; }
int main(int argc, char **argv) {
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigaction(SIGCHLD, &sa, 0);
	sigaction(SIGTERM, &sa, 0);
	int n = atoi(argv[1]), eintr = 0, other = 0;
	for (int i = 0; i < n; i++) {
		pid_t p = fork();
		if (p == 0) _exit(0);
		if (p < 0) { if (errno == EINTR) eintr++; else other++; }
		while (waitpid(-1, 0, WNOHANG) > 0) {}
	}
	while (wait(0) > 0) {}
	sigaction(SIGCHLD, 0, &old);
	int chld = (old.sa_flags & SA_RESTART) != 0;
	sigaction(SIGTERM, 0, &old);
	printf("forks=%d eintr=%d other=%d chld_restart=%d term_restart=%d\n", n, eintr, other, chld, (old.sa_flags & SA_RESTART) != 0);
	return 0;
}
`
