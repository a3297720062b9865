//go:build linux

package program

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seccomp"
	"github.com/confine-sandbox/confine/internal/spawn"
)

func testPlan() *plan.Plan {
	return &plan.Plan{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", UID: -1, GID: -1,
		Seccomp: plan.Seccomp{NotifyMetadata: true}}
}

// The confinement, in one order, whoever supervises: what a failure
// would be reported as names each step.
func TestSubreapedSteps(t *testing.T) {
	arch, _ := seccomp.NativeArch()
	prog, err := seccomp.Cached(plan.Seccomp{Arch: arch, NotifyMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		privileged bool
		want       []string
		absent     []string
	}{
		{true, []string{"set child subreaper", "set securebits", "drop bounding capability 0", "capset", "capget", "check that no capability remains", "no_new_privs",
			"landlock_restrict_self", "seccomp", "hand over the seccomp listener", "close inherited fds"}, nil},
		{false, []string{"set child subreaper", "capset", "no_new_privs", "landlock_restrict_self", "seccomp"},
			[]string{"set securebits", "drop bounding capability 0"}},
	} {
		fds := NoFDs()
		fds.Stdin, fds.Stdout, fds.Stderr, fds.Status, fds.Exit, fds.Notify, fds.Sync, fds.Ruleset = 0, 1, 2, 3, 4, 5, 6, 7
		b, err := ForCore(testPlan(), fds, prog, tc.privileged, "/proc/self/exe")
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(b.desc, "\n")
		last := -1
		for _, w := range tc.want {
			i := strings.Index(all, w)
			if i < 0 || i < last {
				t.Errorf("privileged=%v: step %q missing or out of order in:\n%s", tc.privileged, w, all)
			}
			last = i
		}
		for _, a := range tc.absent {
			if strings.Contains(all, a) {
				t.Errorf("privileged=%v: unexpected step %q", tc.privileged, a)
			}
		}
		if !b.P.Subreaper {
			t.Errorf("not a subreaper program")
		}
	}
}

// A bubblewrap run's command gets the same confinement as any other, with
// no init of its own (the init inside bwrap is pid 1 and forks it).
func TestBwrappedSteps(t *testing.T) {
	arch, _ := seccomp.NativeArch()
	filter, err := seccomp.Cached(plan.Seccomp{Arch: arch, NotifyMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	p := testPlan()
	p.Namespaces = &plan.Namespaces{Bwrap: "/usr/bin/bwrap"}
	fds := NoFDs()
	fds.Stdin, fds.Stdout, fds.Stderr, fds.Status, fds.Notify, fds.Ruleset = 0, 1, 2, 9, 5, 7
	b, err := ForBwrap(p, fds, filter, false)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(b.desc, "\n")
	last := -1
	for _, w := range []string{"arrange descriptor 0", "arrange descriptor 7", "close inherited descriptors", "setsid",
		"capset", "capget", "check that no capability remains", "check the parent is alive", "no_new_privs",
		"landlock_restrict_self", "seccomp", "hand over the seccomp listener", "close inherited fds"} {
		i := strings.Index(all[last+1:], w)
		if i < 0 {
			t.Fatalf("step %q missing or out of order in:\n%s", w, all)
		}
		last += 1 + i
	}
	if len(b.P.Init) != 0 || b.P.Subreaper || b.P.Cloneflags != 0 {
		t.Errorf("a bubblewrap command program with an init of its own: %d init ops, subreaper %v, clone flags %#x", len(b.P.Init), b.P.Subreaper, b.P.Cloneflags)
	}
	fds.Status = -1
	if _, err := ForBwrap(p, fds, filter, false); err == nil {
		t.Error("ForBwrap without a status pipe: no error")
	}
}

// The namespace set-up in its order: every root's mounts cloned before the
// new root hides the host's, the new root filled, pivoted into, the host's
// root detached, then the confinement.
func TestNamespacedSteps(t *testing.T) {
	arch, _ := seccomp.NativeArch()
	filter, err := seccomp.Cached(plan.Seccomp{Arch: arch, NotifyMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	ns := &plan.Namespaces{Private: []string{"/dev/shm"}, TmpfsBytes: 1 << 20, Hostname: "confine"}
	p := testPlan()
	p.Namespaces = ns
	p.Landlock = plan.Landlock{ReadExec: []string{"/usr", "/bin"}, Devices: []string{"/dev/null"}}
	layout := nsinit.PlanLayout(p, nil)
	layout.Stage = "/tmp"
	fds := NoFDs()
	fds.Stdin, fds.Stdout, fds.Stderr, fds.Status, fds.Exit, fds.Notify, fds.Sync, fds.Ruleset = 0, 1, 2, 3, 4, 5, 6, 7
	b, err := ForNamespaces(p, fds, &landlock.Ruleset{FD: 7}, layout, filter)
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(b.desc, "\n")
	last := -1
	for _, w := range []string{"wait for the launcher", "make / private", "clone the mount of /dev/null",
		"clone the mount of /usr", "make /usr read-only", "mount the new root's tmpfs on /tmp", "mount tmpfs on /dev/shm", "bind /dev/null",
		"bind /usr", "recreate symlink /dev/fd", "close the cloned mounts", "mount /proc of the new PID namespace",
		"pivot_root", "detach the host's root", "make the new root read-only", "loopback: SIOCSIFFLAGS", "sethostname",
		"landlock: add rule for /dev/shm", "setsid", "capset", "landlock_restrict_self", "seccomp"} {
		i := strings.Index(all[last+1:], w)
		if i < 0 {
			t.Fatalf("step %q missing or out of order in:\n%s", w, all)
		}
		last += 1 + i
	}
	if strings.Contains(all, "make /dev/null read-only") {
		t.Errorf("a device node bound read-only:\n%s", all)
	}
	if !b.InInit(spawn.Step(strings.Count(all[:strings.Index(all, "pivot_root")], "\n") + 1)) {
		t.Errorf("pivot_root is not counted as namespace set-up (a failure there must fall back to the core)")
	}
}

// A network namespace made ahead (FDs.NetNS) takes the place of the
// clone's: no CLONE_NEWNET and no loopback set-up in the init; every other
// namespace and step stays.
func TestNamespacedNetNS(t *testing.T) {
	arch, _ := seccomp.NativeArch()
	filter, err := seccomp.Cached(plan.Seccomp{Arch: arch, NotifyMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		netns    int
		newnet   bool
		loopback bool
	}{
		{netns: -1, newnet: true, loopback: true},
		{netns: 9, newnet: false, loopback: false},
	} {
		ns := &plan.Namespaces{Private: []string{"/dev/shm"}, TmpfsBytes: 1 << 20, Hostname: "confine"}
		p := testPlan()
		p.Namespaces = ns
		p.Landlock = plan.Landlock{ReadExec: []string{"/usr", "/bin"}}
		layout := nsinit.PlanLayout(p, nil)
		layout.Stage = "/tmp"
		fds := NoFDs()
		fds.Stdin, fds.Stdout, fds.Stderr, fds.Status, fds.Exit, fds.Notify, fds.Sync, fds.Ruleset = 0, 1, 2, 3, 4, 5, 6, 7
		fds.NetNS = tc.netns
		b, err := ForNamespaces(p, fds, &landlock.Ruleset{FD: 7}, layout, filter)
		if err != nil {
			t.Fatal(err)
		}
		all := strings.Join(b.desc, "\n")
		if got := b.P.Cloneflags&unix.CLONE_NEWNET != 0; got != tc.newnet {
			t.Errorf("NetNS %d: CLONE_NEWNET %v, want %v", tc.netns, got, tc.newnet)
		}
		if want := uintptr(nsinit.Flags &^ unix.CLONE_NEWNET); b.P.Cloneflags&want != want {
			t.Errorf("NetNS %d: clone flags %#x lack some of %#x", tc.netns, b.P.Cloneflags, want)
		}
		if got := strings.Contains(all, "loopback: SIOCSIFFLAGS"); got != tc.loopback {
			t.Errorf("NetNS %d: loopback set-up %v, want %v:\n%s", tc.netns, got, tc.loopback, all)
		}
		if !strings.Contains(all, "sethostname") || !strings.Contains(all, "pivot_root") {
			t.Errorf("NetNS %d: a step of the namespace set-up is missing:\n%s", tc.netns, all)
		}
	}
}

func TestStartFailure(t *testing.T) {
	b := &Prepared{desc: []string{"working directory /x"}}
	for _, tc := range []struct {
		f    spawn.Failure
		code int
		msg  string
	}{
		{spawn.Failure{Step: spawn.StepExec, Errno: syscall.ENOENT}, 127, "/bin/x: not found in the sandbox"},
		{spawn.Failure{Step: spawn.StepExec, Errno: syscall.EACCES}, 126, "/bin/x: cannot execute"},
		{spawn.Failure{Step: 1, Errno: syscall.ENOENT}, 125, "working directory /x: no such file or directory"},
		{spawn.Failure{Step: 1}, 125, "working directory /x"},
		{spawn.Failure{Step: 99, Errno: syscall.EPERM}, 125, "step 99: operation not permitted"},
	} {
		code, msg := b.StartFailure("/bin/x", &tc.f)
		if code != tc.code || !strings.HasPrefix(msg, tc.msg) {
			t.Errorf("%+v: got %d %q, want %d %q", tc.f, code, msg, tc.code, tc.msg)
		}
	}
}

// TestNoFDs walks FDs' fields: NoFDs marks every descriptor absent (and
// leaves every switch off), so that a descriptor added later cannot
// default to descriptor 0 at a site built from it.
func TestNoFDs(t *testing.T) {
	v := reflect.ValueOf(NoFDs())
	if v.NumField() == 0 {
		t.Fatal("FDs has no fields")
	}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		switch f.Type.Kind() {
		case reflect.Int: // a descriptor
			if got := v.Field(i).Int(); got != -1 {
				t.Errorf("NoFDs().%s = %d, want -1 (absent)", f.Name, got)
			}
		case reflect.Bool: // a switch: off unless set
			if v.Field(i).Bool() {
				t.Errorf("NoFDs().%s is set, want false", f.Name)
			}
		default:
			t.Errorf("FDs.%s is a %s: decide what NoFDs sets it to, and test it here", f.Name, f.Type)
		}
	}
}

// TestNoFDsLiterals: outside NoFDs no code builds FDs from a literal,
// where a field left out would be descriptor 0.
func TestNoFDsLiterals(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not at %s: %v", root, err)
	}
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "FDs{") && !strings.Contains(line, "return FDs{Stdin: -1") && !strings.Contains(line, "type FDs struct") {
				t.Errorf("%s:%d: an FDs literal; start from program.NoFDs()", path, i+1)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 10 {
		t.Fatalf("walked %d Go files under %s: not the module", files, root)
	}
}
