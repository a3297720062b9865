//go:build linux

package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// memoryBomb starts 64 holders that each take 8 MiB (every page written),
// say "h" and hold it until their stdin reaches EOF. Once every holder has
// either said "h" or died, it lets them go and prints how many held to the
// end (all of those held at once) and how many the kernel killed. Nothing
// in it waits on a clock, so a slow or loaded host changes only how long
// it takes, never what it prints; "held 64" means 512 MiB were held at the
// same time. It starts the holders 8 at a time, each 8 once the 8 before
// have said "h" or died. Started all 64 at once on a slow host (under
// qemu's emulation) the interpreters' own start-up filled the bound before
// any held its 8 MiB, and the kernel's OOM victim, the largest process,
// was the reporter; started one at a time, the tree sat at the bound for
// the harness's 10 minutes without an OOM kill (the kernel reclaiming and
// refaulting program text, we think, rather than giving up).
const memoryBomb = `import subprocess, sys
hold = "b = bytearray(8 << 20)\nimport sys\nsys.stdout.write('h')\nsys.stdout.flush()\nsys.stdin.read()\n"
ps, said = [], []
for _ in range(8):
    batch = [subprocess.Popen([sys.executable, "-c", hold], stdin=subprocess.PIPE, stdout=subprocess.PIPE) for _ in range(8)]
    ps += batch
    said += [p.stdout.read(1) == b"h" for p in batch]
for p in ps:
    p.stdin.close()
codes = [p.wait() for p in ps]
held = sum(1 for s, c in zip(said, codes) if s and c == 0)
killed = sum(1 for c in codes if c == -9)
print("held %d killed %d" % (held, killed), flush=True)
`

// Where a run gets a memory cgroup, --memory bounds the whole tree: 64
// processes of 8 MiB do not fit in 256 MiB, the kernel kills some, the
// result says oom_killed and its peak is the bound. Where none can be made
// (read-only cgroups, as in Docker) the launcher's memory watch ends the
// whole run once the tree passes the bound, and the result says so.
func TestMemoryBoundsTheTree(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("not applicable on this host: python3 missing (%v)", err)
	}
	// The interpreter's files, read once outside any run: a page is
	// charged to the memory cgroup of whoever reads it first, so on a host
	// where python3 never ran (a fresh qemu guest) the run's cgroup would
	// hold the interpreter's page cache too, and at the bound the kernel
	// reclaimed and re-read it (over 9p) rather than kill anything.
	if out, err := exec.Command("python3", "-c", "import subprocess").CombinedOutput(); err != nil {
		t.Fatalf("python3 outside the sandbox: %v: %s", err, out)
	}
	for _, tc := range []struct {
		name  string
		env   []string
		bound string
	}{
		{"cgroup", nil, "memory-cgroup"},
		{"read-only-cgroups", []string{testutil.ReadOnlyCgroupEnv + "=1"}, "memory-watch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testutil.Users(t)[0]
			wd := testutil.Workdir(t, u.UID)
			writeOwned(t, u, filepath.Join(wd, "bomb.py"), memoryBomb)
			r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tc.env,
				Args: []string{"run", "--json", "--memory", "256MiB", "--", "python3", "bomb.py"}}.Run(t)
			var res spec.CommandResult
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
				t.Fatalf("exit %d, not a result: %v\nstdout: %s\nstderr: %s", r.Code, err, r.Stdout, r.Stderr)
			}
			if tc.bound == "memory-cgroup" && res.MemoryBound != tc.bound {
				t.Skipf("not applicable as %s: a run here gets memory_bound %q (no memory cgroup can be made)", u.Name, res.MemoryBound)
			}
			if res.MemoryBound != tc.bound {
				t.Fatalf("memory_bound %q, want %q", res.MemoryBound, tc.bound)
			}
			out := res.Stdout.Text()
			mech := ""
			for _, g := range res.Guarantees {
				if g.Name == "bounded-resources" {
					mech = g.Mechanism
				}
			}
			// Everything a failure needs to be understood from a CI log.
			diag := fmt.Sprintf("exit %d, oom_killed %v, peak %d, backend %s, mechanism %q, stdout %q, stderr %q, swap %q",
				res.ExitCode, res.OOMKilled, res.Usage.PeakMemoryBytes, res.Backend, mech, out, res.Stderr.Text(), swaps())
			switch tc.bound {
			case "memory-cgroup":
				if !res.OOMKilled || strings.Contains(out, "held 64") || !strings.Contains(out, "killed") {
					t.Fatalf("the tree was not stopped at 256 MiB by an OOM kill: %s", diag)
				}
				// The kernel lets a task it is killing charge past the
				// limit (it must be able to exit): a few pages over.
				if res.Usage.PeakMemoryBytes <= 0 || res.Usage.PeakMemoryBytes > 256<<20+1<<20 {
					t.Fatalf("peak_memory_bytes out of (0, 256 MiB + 1 MiB]: %s", diag)
				}
				if !strings.HasPrefix(mech, "memory cgroup") {
					t.Fatalf("bounded-resources does not name the memory cgroup: %s", diag)
				}
				t.Logf("stopped: %s; peak %d MiB", strings.TrimSpace(out), res.Usage.PeakMemoryBytes>>20)
				// Without --json a person is told why the run died.
				p := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tc.env,
					Args: []string{"run", "--memory", "64MiB", "--", "python3", "-c", "b = bytearray(256 << 20)"}}.Run(t)
				if p.Code != 128+9 || !strings.Contains(p.Stderr, "oom_killed") {
					t.Fatalf("exit %d, stderr %q: want 137 and the OOM kill named", p.Code, p.Stderr)
				}
			case "memory-watch":
				// The whole run is ended at the bound: the reporter with
				// the holders, so nothing is printed.
				if !res.MemoryLimitKilled || res.OOMKilled || res.Signal != 9 || strings.Contains(out, "held 64") {
					t.Fatalf("the memory watch should end the whole run at 256 MiB: %s", diag)
				}
				// It sampled the tree above the bound, by at most what the
				// tree allocated in one interval (docs/memory-bound.md).
				if res.Usage.PeakMemoryBytes <= 256<<20 {
					t.Fatalf("peak_memory_bytes %d: the sample that ended the run must be above the bound: %s", res.Usage.PeakMemoryBytes, diag)
				}
				if !strings.HasPrefix(mech, "memory watch") {
					t.Fatalf("bounded-resources says %q: it must name the memory watch", mech)
				}
				t.Logf("stopped at a sample of %d MiB (bound 256 MiB)", res.Usage.PeakMemoryBytes>>20)
				// Without --json a person is told why the run died (shared
				// memory, which RLIMIT_DATA does not refuse).
				p := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tc.env,
					Args: []string{"run", "--memory", "64MiB", "--", "python3", "-c", "import mmap\nm = mmap.mmap(-1, 256 << 20)\nfor _ in range(256): m.write(bytes(1 << 20))"}}.Run(t)
				if p.Code != 128+9 || !strings.Contains(p.Stderr, "memory_limit_killed") {
					t.Fatalf("exit %d, stderr %q: want 137 and the memory kill named", p.Code, p.Stderr)
				}
			}
		})
	}
}

// swaps is /proc/swaps: a bound that let the tree swap would not stop it.
func swaps() string {
	b, err := os.ReadFile("/proc/swaps")
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(string(b))
}

// writeOwned writes a file into u's work directory, owned by u.
func writeOwned(t *testing.T, u testutil.User, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(path, u.UID, u.UID); err != nil {
			t.Fatal(err)
		}
	}
}
