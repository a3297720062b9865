//go:build linux

package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// memoryHolder takes 8 MiB, registers in "held", waits until 64 have
// registered (all holding at once) and then says "all". A holder the
// kernel killed never says it, so 64 "all" lines mean 512 MiB were held at
// the same time.
const memoryHolder = `import time
b = bytearray(8 << 20)
with open("held", "a") as f:
    f.write("h\n")
for _ in range(300):
    with open("held") as f:
        if len(f.readlines()) >= 64:
            print("all", flush=True)
            break
    time.sleep(0.05)
`

const memoryBomb = `i=0; while [ $i -lt 64 ]; do python3 holder.py >> all & i=$((i+1)); done; wait; echo "held $(grep -c all all)"`

// Where a run gets a memory cgroup, --memory bounds the whole tree: 64
// processes of 8 MiB do not fit in 256 MiB, the kernel kills some, the
// result says oom_killed and its peak is the bound. Where none can be made
// (read-only cgroups, as in Docker) the bound is per process, and the
// result says so.
func TestMemoryBoundsTheTree(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skipf("not applicable on this host: python3 missing (%v)", err)
	}
	for _, tc := range []struct {
		name  string
		env   []string
		bound string
	}{
		{"cgroup", nil, "memory-cgroup"},
		{"read-only-cgroups", []string{testutil.ReadOnlyCgroupEnv + "=1"}, "rlimit-data"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := testutil.Users(t)[0]
			wd := testutil.Workdir(t, u.UID)
			writeOwned(t, u, filepath.Join(wd, "holder.py"), memoryHolder)
			r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tc.env,
				Args: []string{"run", "--json", "--memory", "256MiB", "--", "sh", "-c", memoryBomb}}.Run(t)
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
			switch tc.bound {
			case "memory-cgroup":
				if !res.OOMKilled || strings.Contains(out, "held 64") {
					t.Fatalf("the tree was not stopped at 256 MiB: oom_killed %v, stdout %q", res.OOMKilled, out)
				}
				// The kernel lets a task it is killing charge past the
				// limit (it must be able to exit): a few pages over.
				if res.Usage.PeakMemoryBytes <= 0 || res.Usage.PeakMemoryBytes > 256<<20+1<<20 {
					t.Fatalf("peak_memory_bytes %d, want within (0, 256 MiB + 1 MiB]", res.Usage.PeakMemoryBytes)
				}
				if !strings.HasPrefix(mech, "memory cgroup") {
					t.Fatalf("bounded-resources says %q", mech)
				}
				t.Logf("stopped: %s; peak %d MiB", strings.TrimSpace(out), res.Usage.PeakMemoryBytes>>20)
				// Without --json a person is told why the run died.
				p := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tc.env,
					Args: []string{"run", "--memory", "64MiB", "--", "python3", "-c", "b = bytearray(256 << 20)"}}.Run(t)
				if p.Code != 128+9 || !strings.Contains(p.Stderr, "oom_killed") {
					t.Fatalf("exit %d, stderr %q: want 137 and the OOM kill named", p.Code, p.Stderr)
				}
			case "rlimit-data":
				// Per process: every holder fits, and the result says the
				// bound is per process rather than claiming the tree.
				if res.OOMKilled || !strings.Contains(out, "held 64") {
					t.Fatalf("oom_killed %v, stdout %q: the per-process bound should let 64 x 8 MiB through", res.OOMKilled, out)
				}
				if !strings.Contains(mech, "RLIMIT_DATA") || !strings.Contains(mech, "per process") {
					t.Fatalf("bounded-resources says %q: it must name RLIMIT_DATA and say it is per process", mech)
				}
			}
		})
	}
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
