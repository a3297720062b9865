//go:build linux

package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The default memory bound: half of MemTotal, never above the smallest
// limit of the caller's cgroups (own or ancestor, v1 or v2), and a
// limit written as "max" or v1's near-2^63 "unlimited" is none.
func TestDefaultMemoryBound(t *testing.T) {
	const gib = int64(1) << 30
	for _, tc := range []struct {
		name    string
		meminfo string
		cgroup  string
		mounts  string
		files   map[string]string // under the fake cgroupfs
		limit   int64             // CallerMemoryLimit
		want    int64
	}{
		{name: "no cgroup limit: half of RAM",
			meminfo: "MemTotal:       16777216 kB\n", cgroup: "0::/user.slice\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"user.slice/memory.max": "max\n", "memory.max": "max\n"},
			want:   8 * gib},
		{name: "v2: the caller's own limit, smaller than half of RAM",
			meminfo: "MemTotal: 16777216 kB\n", cgroup: "0::/a/b\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"a/b/memory.max": "2147483648\n", "a/memory.max": "max\n"},
			limit:  2 * gib, want: 2 * gib},
		{name: "v2: an ancestor's limit holds the caller too",
			meminfo: "MemTotal: 16777216 kB\n", cgroup: "0::/a/b\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"a/b/memory.max": "max\n", "a/memory.max": "1073741824\n"},
			limit:  gib, want: gib},
		{name: "v1: memory.limit_in_bytes, unlimited at the root",
			meminfo: "MemTotal: 16777216 kB\n", cgroup: "4:memory:/process_api/x\n",
			mounts: "35 31 0:32 / CG rw - cgroup cgroup rw,memory\n",
			files:  map[string]string{"process_api/x/memory.limit_in_bytes": "3221225472\n", "memory.limit_in_bytes": "9223372036854771712\n"},
			limit:  3 * gib, want: 3 * gib},
		{name: "a limit above half of RAM leaves half of RAM",
			meminfo: "MemTotal: 4194304 kB\n", cgroup: "0::/a\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"a/memory.max": "3221225472\n"},
			limit:  3 * gib, want: 2 * gib},
		{name: "a container's cgroup namespace: its root is the container's cgroup",
			meminfo: "MemTotal: 16777216 kB\n", cgroup: "0::/\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"memory.max": "536870912\n"},
			limit:  512 << 20, want: 512 << 20},
		{name: "MemTotal unknown: the fallback, still capped",
			meminfo: "", cgroup: "0::/a\n",
			mounts: "41 31 0:38 / CG rw - cgroup2 cgroup2 rw\n",
			files:  map[string]string{"a/memory.max": "1073741824\n"},
			limit:  gib, want: gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cg := filepath.Join(dir, "cg")
			write := func(p, body string) string {
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
				return p
			}
			for name, body := range tc.files {
				write(filepath.Join(cg, name), body)
			}
			meminfo := write(filepath.Join(dir, "meminfo"), tc.meminfo)
			cgroup := write(filepath.Join(dir, "cgroup"), tc.cgroup)
			mounts := write(filepath.Join(dir, "mountinfo"), replaceCG(tc.mounts, cg))
			if got := CallerMemoryLimit(cgroup, mounts); got != tc.limit {
				t.Errorf("CallerMemoryLimit = %d, want %d", got, tc.limit)
			}
			if got := defaultMemoryBound(meminfo, cgroup, mounts, 8*gib); got != tc.want {
				t.Errorf("defaultMemoryBound = %d, want %d", got, tc.want)
			}
		})
	}
}

func replaceCG(mounts, cg string) string { return strings.ReplaceAll(mounts, "CG", cg) }

// On this host the default is positive and never above half of RAM.
func TestDefaultMemoryBoundHere(t *testing.T) {
	got := DefaultMemoryBound(8 << 30)
	total := memTotal("/proc/meminfo")
	if got <= 0 || total > 0 && got > total/DefaultMemoryShare {
		t.Fatalf("DefaultMemoryBound = %d with MemTotal %d", got, total)
	}
	// The per-process cache (selfView, selfMemTotal) answers as a fresh
	// read of the same files does, also on a second call.
	for i := 0; i < 2; i++ {
		if fresh := defaultMemoryBound("/proc/meminfo", "/proc/self/cgroup", "/proc/self/mountinfo", 8<<30); DefaultMemoryBound(8<<30) != fresh {
			t.Fatalf("call %d: DefaultMemoryBound = %d, a fresh read gives %d", i, DefaultMemoryBound(8<<30), fresh)
		}
	}
	t.Logf("default memory bound here: %d MiB (MemTotal %d MiB, caller's cgroup limit %d MiB)", got>>20, total>>20, CallerMemoryLimit("/proc/self/cgroup", "/proc/self/mountinfo")>>20)
}

// BenchmarkDefaultMemoryBound is a run's cost of the default bound
// (docs/performance-launch.md).
func BenchmarkDefaultMemoryBound(b *testing.B) {
	for b.Loop() {
		DefaultMemoryBound(8 << 30)
	}
}

// BenchmarkDefaultMemoryBoundFresh is the same with every file read and
// parsed again, as before the per-process cache.
func BenchmarkDefaultMemoryBoundFresh(b *testing.B) {
	for b.Loop() {
		defaultMemoryBound("/proc/meminfo", "/proc/self/cgroup", "/proc/self/mountinfo", 8<<30)
	}
}
