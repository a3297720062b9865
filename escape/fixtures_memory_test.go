//go:build linux

package escape

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// memoryVectors attack bounded-resources' memory bound beyond one
// process: 64 processes of 16 MiB each (1 GiB at once) under --memory
// 256MiB, and shared anonymous memory, which RLIMIT_DATA does not count.
// (16 MiB, not 8: each holder is then well above the probe's own
// processes, so the kernel's OOM victim is a holder and the probe lives
// to report; with 8 MiB the reporter was once the victim.)
// Where the run gets a memory cgroup both must be stopped. Where it
// cannot (cgroup mounts read-only, as in Docker: ReadOnlyCgroupEnv, or an
// unprivileged launcher without a delegated hierarchy) the bound is per
// process, as the ledger says: the -no-memory-cgroup rows attack that
// bound, and the per-process bound's known gaps are rows too, marked so.
func memoryVectors() []vcase {
	roCgroup := []string{testutil.ReadOnlyCgroupEnv + "=1"}
	return []vcase{
		{name: "memory-bomb-tree", vector: "memory-bomb-tree", setup: func(e *env) fixture {
			needMemoryBound(e, nil, "memory-cgroup")
			if e.confined {
				return fixture{args: []string{"64", "16"}, cliArgs: []string{"--memory", "256MiB"}, mustReport: true}
			}
			return fixture{args: []string{"64", "16"}}
		}},
		{name: "memory-bomb-shared", vector: "memory-bomb-shared", setup: func(e *env) fixture {
			needMemoryBound(e, nil, "memory-cgroup")
			if e.confined {
				return fixture{args: []string{"512"}, cliArgs: []string{"--memory", "256MiB"}, mustReport: true}
			}
			return fixture{args: []string{"64"}}
		}},
		// One process over the bound, where only RLIMIT_DATA holds: the
		// allocation itself is refused (ENOMEM), so the probe reports.
		{name: "memory-bomb-no-memory-cgroup", vector: "memory-bomb", setup: func(e *env) fixture {
			needMemoryBound(e, roCgroup, "rlimit-data")
			if e.confined {
				return fixture{args: []string{"2048"}, cliArgs: []string{"--memory", "1GiB"}, env: roCgroup, mustReport: true}
			}
			return fixture{args: []string{"64"}}
		}},
		// What the per-process bound does not stop, said in the ledger:
		// shared memory is not private writable memory.
		{name: "memory-bomb-shared-no-memory-cgroup", vector: "memory-bomb-shared", knownGap: "bounded-resources without a memory cgroup: RLIMIT_DATA does not count shared mappings (the ledger says so)",
			setup: func(e *env) fixture {
				needMemoryBound(e, roCgroup, "rlimit-data")
				if e.confined {
					return fixture{args: []string{"512"}, cliArgs: []string{"--memory", "256MiB"}, env: roCgroup, mustReport: true}
				}
				return fixture{args: []string{"64"}}
			}},
	}
}

var (
	memoryBoundMu sync.Mutex
	memoryBounds  = map[string]string{}
)

// needMemoryBound skips the row unless a run as e's user, with the CLI
// environment env and e's backend, reports memory_bound want: the row
// attacks that bound only (bubblewrap's runs have no memory cgroup).
func needMemoryBound(e *env, env []string, want string) {
	e.t.Helper()
	if got := memoryBound(e.t, e.user, env, e.backend); got != want {
		e.t.Skipf("not applicable as %s (backend %q): this row attacks the %s bound; a run here gets %q", e.user.Name, e.backend, want, got)
	}
}

// memoryBound is what bounds a run's memory as u with env: "memory-cgroup"
// or "rlimit-data" (the result's memory_bound), from one real run.
func memoryBound(t *testing.T, u testutil.User, env []string, backend string) string {
	t.Helper()
	key := u.Name + " " + backend
	for _, kv := range env {
		key += " " + kv
	}
	memoryBoundMu.Lock()
	defer memoryBoundMu.Unlock()
	if b, ok := memoryBounds[key]; ok {
		return b
	}
	wd := testutil.Workdir(t, u.UID)
	args := []string{"run", "--json", "--workdir", wd}
	if backend != "" {
		args = append(args, "--backend", backend)
	}
	o := cliRun(t, u, wd, env, append(args, "--", "true")...)
	var res struct {
		MemoryBound string `json:"memory_bound"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || o.code != 0 || res.MemoryBound == "" {
		t.Fatalf("confine run --json true as %s: exit %d, no memory_bound: %v\nstdout: %s\nstderr: %s", u.Name, o.code, err, o.stdout, o.stderr)
	}
	memoryBounds[key] = res.MemoryBound
	return res.MemoryBound
}
