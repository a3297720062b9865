package program

import (
	"strings"
	"syscall"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seccomp"
	"github.com/confine-sandbox/confine/internal/spawn"
)

func testPlan() *plan.Plan {
	return &plan.Plan{Path: "/bin/true", Argv: []string{"true"}, Dir: "/", UID: -1, GID: -1,
		Seccomp: plan.Seccomp{NotifyMetadata: true}}
}

// The confinement, in stage-2's order, whoever supervises: what a failure
// would be reported as names each step.
func TestSubreapedSteps(t *testing.T) {
	arch, _ := seccomp.NativeArch()
	prog, err := seccomp.Cached(seccomp.Config{Arch: arch, NotifyMetadata: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		privileged bool
		want       []string
		absent     []string
	}{
		{true, []string{"set child subreaper", "set securebits", "drop bounding capability 0", "capset", "no_new_privs",
			"landlock_restrict_self", "seccomp", "hand over the seccomp listener", "close inherited fds"}, nil},
		{false, []string{"set child subreaper", "capset", "no_new_privs", "landlock_restrict_self", "seccomp"},
			[]string{"set securebits", "drop bounding capability 0"}},
	} {
		fds := FDs{Stdin: 0, Stdout: 1, Stderr: 2, Status: 3, Exit: 4, Notify: 5, Sync: 6, Ruleset: 7, Janitor: -1}
		b, err := Subreaped(testPlan(), fds, prog, tc.privileged, "/proc/self/exe")
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

func TestStartFailure(t *testing.T) {
	b := &Built{desc: []string{"working directory /x"}}
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
