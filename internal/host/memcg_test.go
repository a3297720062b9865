//go:build linux

package host

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
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
	var pids int64
	if mc.V2 && mc.Pids {
		pids = 80
	}
	if err := CreateMemoryCgroup(mc, dir, 64<<20, pids); err != nil {
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
	if mc.V2 {
		want := map[string]string{"memory.swap.max": "0\n"}
		if pids > 0 {
			want["pids.max"] = "80\n"
		}
		for f, v := range want {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != v {
				t.Errorf("%s = %q, %v; want %q", f, b, err, v)
			}
		}
	}
	st, err := ReadMemoryStats(mc, dir)
	if err != nil || st.OOMKills != 0 {
		t.Fatalf("stats %+v, %v", st, err)
	}
}

// hogEnv names the memory cgroup TestHelperHog joins before it takes
// hogBytes (every page written).
const (
	hogEnv   = "CONFINE_HOST_TEST_HOG"
	hogBytes = 128 << 20
)

// TestHelperHog is the child of TestMemoryCgroupStopsATree, not a test.
func TestHelperHog(t *testing.T) {
	dir := os.Getenv(hogEnv)
	if dir == "" {
		t.Skip("helper process of TestMemoryCgroupStopsATree: runs only as its child")
	}
	if dir != "-" {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte("0"), 0); err != nil {
			fmt.Fprintf(os.Stderr, "join %s: %v\n", dir, err)
			os.Exit(3)
		}
	}
	b := make([]byte, hogBytes)
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1
	}
	fmt.Println("held", len(b)>>20, "MiB")
	os.Exit(0)
}

// Where this host lets the test make one (cgroup v1 or v2), a memory
// cgroup stops a process that joined it at its bound, and its stats say
// so: an OOM kill counted and a peak within the bound. The control is the
// same child without the cgroup, which holds what it took.
func TestMemoryCgroupStopsATree(t *testing.T) {
	mc, err := memoryCgroup()
	if err != nil {
		t.Skipf("not applicable here: %v", err)
	}
	const bound = 32 << 20
	run := func(dir string) (string, error) {
		c := exec.Command(os.Args[0], "-test.run=^TestHelperHog$", "-test.count=1")
		c.Env = append(os.Environ(), hogEnv+"="+dir)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	// The control: the hog left in the test's own cgroup holds all it
	// took.
	if out, err := run("-"); err != nil || !strings.Contains(out, "held 128 MiB") {
		t.Fatalf("control (no cgroup of its own): %v, %q: want it to hold 128 MiB", err, out)
	}
	dir := filepath.Join(mc.Parent, "confine-test-hog-"+filepath.Base(t.TempDir()))
	if err := CreateMemoryCgroup(mc, dir, bound, 0); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := RemoveCgroup(dir); err != nil {
			t.Error(err)
		}
	}()
	out, err := run(dir)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the hog in a %d MiB cgroup (v2 %v): %v, %q: want killed by SIGKILL", bound>>20, mc.V2, err, out)
	}
	st, err := ReadMemoryStats(mc, dir)
	if err != nil {
		t.Fatal(err)
	}
	// The kernel lets a task it is killing charge a little past the bound.
	if st.OOMKills < 1 || st.Peak <= 0 || st.Peak > bound+1<<20 {
		t.Fatalf("stats %+v: want an OOM kill and a peak in (0, %d]", st, bound+1<<20)
	}
	t.Logf("v2 %v: stopped at %d MiB, %d OOM kill(s)", mc.V2, st.Peak>>20, st.OOMKills)
}

// Where the kernel does not account swap per cgroup (on a plain directory
// no memsw or swap.max file exists) and the host has swap, v1 turns the
// cgroup's swappiness to 0 and v2 refuses: a tree at its bound must be
// stopped, not swapped out. A v2 cgroup that must bound the tasks too
// and has no pids.max is refused; v1 never takes pids (its pids cgroup
// is another hierarchy, which the run stays in).
func TestCreateMemoryCgroupSwap(t *testing.T) {
	for _, tc := range []struct {
		name           string
		v2, swap       bool
		pids           int64
		err            error
		wantSwappiness bool
	}{
		{"v1 no swap", false, false, 0, nil, false},
		{"v1 swap unaccounted", false, true, 0, nil, true},
		{"v1 pids ignored", false, false, 80, nil, false},
		{"v2 no swap", true, false, 0, nil, false},
		{"v2 swap unaccounted", true, true, 0, ErrSwapUnbounded, false},
		{"v2 no pids controller", true, false, 80, ErrNoPidsController, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run")
			err := createMemoryCgroup(MemoryCgroup{V2: tc.v2}, dir, 64<<20, tc.pids, tc.swap)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			// On a plain directory the writes create files of mode 0,
			// which only root could read back.
			_ = os.Chmod(filepath.Join(dir, "memory.swappiness"), 0o600)
			b, err := os.ReadFile(filepath.Join(dir, "memory.swappiness"))
			if got := err == nil && string(b) == "0"; got != tc.wantSwappiness {
				t.Fatalf("swappiness 0 written: %v, want %v", got, tc.wantSwappiness)
			}
			if _, err := os.Stat(filepath.Join(dir, "pids.max")); err == nil {
				t.Fatal("pids.max written where the kernel made none")
			}
		})
	}
}

// findMemoryCgroup over fake cgroup trees: where runs' memory cgroups go
// on v1 (the launcher's own) and v2 (its own only where that may have
// children with memory: the root; else the nearest ancestor that may and
// that it can write, capped by the memory.max of the cgroups between).
func TestFindMemoryCgroup(t *testing.T) {
	type node struct{ ctl, max string }
	for _, tc := range []struct {
		name     string
		own      string // the launcher's cgroup, below the mount
		v1       bool
		tree     map[string]node // cgroup -> subtree_control, memory.max ("" for none)
		readonly []string        // cgroups it may not write
		swap     bool
		want     string // Parent, relative to the mount; "" for ErrNoMemoryCgroup
		pids     bool
		cap      int64
	}{
		{name: "v2 root", own: "/", tree: map[string]node{"/": {ctl: "memory pids"}}, want: "/", pids: true},
		{name: "v2 root, no memory", own: "/", tree: map[string]node{"/": {ctl: "pids"}}},
		{name: "v2 root with swap", own: "/", swap: true, tree: map[string]node{"/": {ctl: "memory"}}},
		{name: "v2 service beside", own: "/system.slice/ci.service",
			tree: map[string]node{"/": {ctl: "memory pids"}, "/system.slice": {ctl: "memory pids", max: "max"}, "/system.slice/ci.service": {max: "max"}},
			want: "/system.slice", pids: true},
		{name: "v2 service beside, swap accounted", own: "/system.slice/ci.service", swap: true,
			tree: map[string]node{"/": {ctl: "memory"}, "/system.slice": {ctl: "memory", max: "max"}, "/system.slice/ci.service": {max: "max"}},
			want: "/system.slice"},
		{name: "v2 user scope capped", own: "/user.slice/user@1000.service/app.slice/x.scope",
			tree: map[string]node{"/": {ctl: "memory pids"}, "/user.slice": {ctl: "memory pids", max: "max"},
				"/user.slice/user@1000.service":                   {ctl: "memory pids", max: "4294967296"},
				"/user.slice/user@1000.service/app.slice":         {ctl: "memory", max: "max"},
				"/user.slice/user@1000.service/app.slice/x.scope": {max: "1073741824"}},
			readonly: []string{"/", "/user.slice"},
			want:     "/user.slice/user@1000.service/app.slice", cap: 1 << 30},
		{name: "v2 the nearest writable, capped by all it leaves", own: "/a/b/c",
			tree:     map[string]node{"/": {ctl: "memory"}, "/a": {ctl: "memory", max: "2147483648"}, "/a/b": {ctl: "memory", max: "4294967296"}, "/a/b/c": {max: "3221225472"}},
			readonly: []string{"/a/b"},
			want:     "/a", cap: 3 << 30},
		{name: "v2 cgroup.procs read-only", own: "/a/b",
			tree:     map[string]node{"/": {ctl: "memory"}, "/a": {ctl: "memory"}, "/a/b": {}},
			readonly: []string{"/a/cgroup.procs", "/"}},
		{name: "v2 parent without memory", own: "/a/b",
			tree:     map[string]node{"/": {ctl: "pids"}, "/a": {ctl: "pids"}, "/a/b": {}},
			readonly: nil},
		{name: "v1 own", own: "/process_api/x", v1: true, tree: map[string]node{"/process_api/x": {}}, want: "/process_api/x"},
		{name: "v1 read-only", own: "/process_api/x", v1: true, tree: map[string]node{"/process_api/x": {}}, readonly: []string{"/process_api/x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			point := filepath.Join(base, "cg")
			for cg, n := range tc.tree {
				d := filepath.Join(point, cg)
				files := map[string]string{"cgroup.procs": "", "tasks": ""}
				if !tc.v1 {
					files = map[string]string{"cgroup.procs": "", "cgroup.subtree_control": n.ctl + "\n"}
					if n.max != "" {
						files["memory.max"] = n.max + "\n"
						files["memory.swap.max"] = "max\n"
					}
				}
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
				for f, body := range files {
					if err := os.WriteFile(filepath.Join(d, f), []byte(body), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			cgroupFile := filepath.Join(base, "cgroup")
			mountinfo := filepath.Join(base, "mountinfo")
			self, mount := "0::"+tc.own+"\n", "41 31 0:38 / "+point+" rw,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
			if tc.v1 {
				self, mount = "4:memory:"+tc.own+"\n0::/\n", "35 31 0:32 / "+point+" rw,relatime - cgroup cgroup rw,memory\n"
			}
			if err := os.WriteFile(cgroupFile, []byte(self), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(mountinfo, []byte(mount), 0o644); err != nil {
				t.Fatal(err)
			}
			writable := func(p string) bool {
				for _, r := range tc.readonly {
					if p == filepath.Join(point, r) {
						return false
					}
				}
				return true
			}
			mc, err := findMemoryCgroup(cgroupFile, mountinfo, tc.swap, writable)
			if tc.want == "" {
				if !errors.Is(err, ErrNoMemoryCgroup) {
					t.Fatalf("got %+v, %v; want ErrNoMemoryCgroup", mc, err)
				}
				return
			}
			want := MemoryCgroup{Parent: filepath.Join(point, tc.want), V2: !tc.v1, Pids: tc.pids, Cap: tc.cap}
			if err != nil || mc != want {
				t.Fatalf("got %+v, %v; want %+v", mc, err, want)
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
