//go:build linux

package host

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestMemoryCgroupParsing(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	own, err := ownCgroups(write("cgroup", "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpu,cpuacct:/x\n0::/user.slice/u.scope\n"))
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"memory": "/process_api/abc", "cpu": "/x", "cpuacct": "/x", "": "/user.slice/u.scope", "pids": "/"} {
		if own[k] != want {
			t.Errorf("own[%q] = %q, want %q", k, own[k], want)
		}
	}
	mounts, err := cgroupMounts(write("mountinfo", `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 /process_api /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified\040x rw,relatime - cgroup2 cgroup2 rw
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []cgroupMount{
		{root: "/process_api", point: "/sys/fs/cgroup/memory", memory: true},
		{root: "/", point: "/sys/fs/cgroup/unified x", v2: true},
	}
	if len(mounts) != len(want) {
		t.Fatalf("mounts %+v, want %+v", mounts, want)
	}
	for i := range want {
		if mounts[i] != want[i] {
			t.Errorf("mount %d = %+v, want %+v", i, mounts[i], want[i])
		}
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{`/a`: "/a", `/a\040b`: "/a b", `/a\134`: `/a\`, `/a\0`: `/a\0`, `/tab\011`: "/tab\t"} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}

// Where this host lets the test make one, a memory cgroup takes its
// bound, reads back, and goes away.
func TestCreateMemoryCgroup(t *testing.T) {
	mc, err := memoryCgroup()
	if err != nil {
		t.Skipf("not applicable here: %v", err)
	}
	dir := filepath.Join(mc.Parent, "confine-test-"+filepath.Base(t.TempDir()))
	if err := CreateMemoryCgroup(mc, dir, 64<<20); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := RemoveCgroup(dir); err != nil {
			t.Error(err)
		}
	}()
	limit := "memory.limit_in_bytes"
	if mc.V2 {
		limit = "memory.max"
	}
	b, err := os.ReadFile(filepath.Join(dir, limit))
	if err != nil || string(b) != "67108864\n" {
		t.Fatalf("%s = %q, %v; want 67108864", limit, b, err)
	}
	st, err := ReadMemoryStats(mc, dir)
	if err != nil || st.OOMKills != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// Where the kernel does not account swap per cgroup (on a plain directory
// no memsw or swap.max file exists) and the host has swap, v1 turns the
// cgroup's swappiness to 0 and v2 refuses: a tree at its bound must be
// stopped, not swapped out.
func TestCreateMemoryCgroupSwap(t *testing.T) {
	for _, tc := range []struct {
		name           string
		v2, swap       bool
		err            error
		wantSwappiness bool
	}{
		{"v1 no swap", false, false, nil, false},
		{"v1 swap unaccounted", false, true, nil, true},
		{"v2 no swap", true, false, nil, false},
		{"v2 swap unaccounted", true, true, ErrSwapUnbounded, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			err := createMemoryCgroup(MemoryCgroup{V2: tc.v2}, dir, 64<<20, tc.swap)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			b, err := os.ReadFile(filepath.Join(dir, "memory.swappiness"))
			if got := err == nil && string(b) == "0"; got != tc.wantSwappiness {
				t.Fatalf("swappiness 0 written: %v, want %v", got, tc.wantSwappiness)
			}
		})
	}
}

func TestSwapActive(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		want       bool
	}{
		{"header only", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n", false},
		{"one swap file", "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swapfile file 1048572 0 -2\n", true},
	} {
		p := filepath.Join(dir, tc.name)
		if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := swapActive(p); got != tc.want {
			t.Errorf("%s: swapActive %v, want %v", tc.name, got, tc.want)
		}
	}
	if !swapActive(filepath.Join(dir, "missing")) {
		t.Error("an unreadable swaps file must count as swap in use")
	}
}
