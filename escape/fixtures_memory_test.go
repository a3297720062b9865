//go:build linux

package escape

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// memoryVectors attack bounded-resources' memory bound beyond one
// process: 64 processes of 16 MiB each (1 GiB at once) under --memory
// 256MiB, 3 of 300 MiB under 600MiB, and shared anonymous memory, which
// RLIMIT_DATA does not count.
// (16 MiB, not 8: each holder is then well above the probe's own
// processes, so the kernel's OOM victim is a holder and the probe lives
// to report; with 8 MiB the reporter was once the victim.)
// Where the run gets a memory cgroup the kernel must stop them; where it
// cannot (cgroup mounts read-only, as in Docker: ReadOnlyCgroupEnv, or an
// unprivileged launcher without a delegated hierarchy) the bound is per
// process (RLIMIT_DATA) and the launcher's memory watch bounds the tree,
// as the ledger says: the -no-memory-cgroup rows attack those bounds.
func memoryVectors() []vcase {
	roCgroup := []string{testutil.ReadOnlyCgroupEnv + "=1"}
	return []vcase{
		// Under whatever whole-tree bound the run gets here: its memory
		// cgroup (the kernel kills a holder, the probe reports) or the
		// memory watch (it ends the whole run).
		{name: "memory-bomb-tree", vector: "memory-bomb-tree", setup: func(e *env) fixture {
			if e.confined {
				return treeBound(e, fixture{args: []string{"64", "16"}, cliArgs: []string{"--memory", "256MiB"}})
			}
			return fixture{args: []string{"64", "16"}}
		}},
		{name: "memory-bomb-shared", vector: "memory-bomb-shared", setup: func(e *env) fixture {
			if e.confined {
				return treeBound(e, fixture{args: []string{"512"}, cliArgs: []string{"--memory", "256MiB"}})
			}
			return fixture{args: []string{"64"}}
		}},
		// One process over the bound, where no memory cgroup can be made:
		// RLIMIT_DATA refuses the allocation itself (ENOMEM) before the
		// memory watch would end the run, so the probe reports.
		{name: "memory-bomb-no-memory-cgroup", vector: "memory-bomb", setup: func(e *env) fixture {
			needMemoryBound(e, roCgroup, "memory-watch")
			if e.confined {
				return fixture{args: []string{"2048"}, cliArgs: []string{"--memory", "1GiB"}, env: roCgroup, mustReport: true}
			}
			return fixture{args: []string{"64"}}
		}},
		// Shared memory, which RLIMIT_DATA does not count: the memory
		// watch counts it (RssShmem) and ends the whole run.
		{name: "memory-bomb-shared-no-memory-cgroup", vector: "memory-bomb-shared", setup: func(e *env) fixture {
			needMemoryBound(e, roCgroup, "memory-watch")
			if e.confined {
				return fixture{args: []string{"512", "hold"}, cliArgs: []string{"--memory", "256MiB"}, env: roCgroup, judge: memoryWatchStopped}
			}
			return fixture{args: []string{"64"}}
		}},
		// A memfd written with write() and never mapped: in no
		// process's RSS; the memory watch counts the memory-backed files
		// the tree holds open.
		{name: "memory-bomb-memfd-no-memory-cgroup", vector: "memory-bomb-memfd", setup: func(e *env) fixture {
			needMemoryBound(e, roCgroup, "memory-watch")
			if e.confined {
				return fixture{args: []string{"512", "hold"}, cliArgs: []string{"--memory", "256MiB"}, env: roCgroup, judge: memoryWatchStopped}
			}
			return fixture{args: []string{"64"}}
		}},
		// The tree bomb: 3 processes of 300 MiB each under --memory
		// 600MiB. Each is within RLIMIT_DATA (600 MiB), so only a bound on
		// the whole tree stops them: the memory watch ends the run. The
		// control holds all 900 MiB at once.
		{name: "memory-bomb-tree-no-memory-cgroup", vector: "memory-bomb-tree", setup: func(e *env) fixture {
			needMemoryBound(e, roCgroup, "memory-watch")
			if e.confined {
				return fixture{args: []string{"3", "300", "hold"}, cliArgs: []string{"--memory", "600MiB"}, env: roCgroup, judge: memoryWatchStopped}
			}
			return fixture{args: []string{"3", "300"}}
		}},
	}
}

var (
	memoryBoundMu sync.Mutex
	memoryBounds  = map[string]string{}
)

// treeBound completes f, a confined run that a whole-tree bound must
// stop, for the bound a run as e's user gets here: under its memory
// cgroup the probe must report blocked; under the memory watch the run
// must end at its bound (memoryWatchStopped). Any other bound skips it.
func treeBound(e *env, f fixture) fixture {
	e.t.Helper()
	switch b := memoryBound(e.t, e.user, f.env, e.backend); b {
	case "memory-cgroup":
		f.mustReport = true
	case "memory-watch":
		f.judge = memoryWatchStopped
		f.args = append(f.args, "hold")
	default:
		e.t.Skipf("not applicable as %s (backend %q): a run here gets memory_bound %q, no whole-tree bound", e.user.Name, e.backend, b)
	}
	return f
}

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
// "memory-watch" or "rlimit-data" (the result's memory_bound), from one
// real run.
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

// memoryWatchStopped judges a confined run the memory watch must stop:
// the watch kills the whole tree, the probe included, so the verdict is
// the CLI's (exit 137 and the memory kill named) unless the probe
// reported first. Anything else counts as escaped: a run that neither
// reported blocked nor was stopped at its bound proves nothing.
//
// The bombs it judges hold what they got until the run is ended ("hold"):
// the watch samples, and a bomb that let go at once could fall between
// two samples on a loaded host.
func memoryWatchStopped(o outcome) (bool, string) {
	switch {
	case o.hasReport && o.report.Outcome == "blocked":
		return false, o.brief()
	case o.code == 128+9 && strings.Contains(o.stderr, "memory_limit_killed"):
		return false, "the memory watch ended the run: " + strings.TrimSpace(o.stderr)
	}
	return true, "the run was not stopped at its memory bound: " + o.brief()
}
