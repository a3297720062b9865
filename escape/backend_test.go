//go:build linux

package escape

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// checkReport is the part of `confine check --json` these tests read.
type checkReport struct {
	Host struct {
		UserNS    bool   `json:"user_namespaces"`
		UserNSErr string `json:"user_namespaces_error"`
	} `json:"host"`
	Backend    string                `json:"backend"`
	Layers     []string              `json:"layers"`
	Skipped    []spec.SkippedBackend `json:"skipped_backends"`
	Guarantees []struct {
		Name      string `json:"name"`
		Mechanism string `json:"mechanism"`
	} `json:"guarantees"`
}

// Provider selection, really spawning: on this host (user namespaces work)
// the landlock+namespaces provider is selected and its namespaces are
// visible from inside the run; in a simulated stock Docker container
// (namespaces refused by seccomp, see testutil.ContainerFilter) the core is
// selected, says why, and the run shows no namespace. Both as root and as
// uid 65534. The escape suite itself runs in both modes in CI (see
// testutil.SimulateContainerEnv).
func TestBackends(t *testing.T) {
	for _, u := range testutil.Users(t) {
		for _, container := range []bool{false, true} {
			name := u.Name + "/host"
			if container {
				name = u.Name + "/container"
			}
			t.Run(name, func(t *testing.T) {
				if !container && testutil.SimulatingContainer() {
					t.Skipf("every CLI runs in the simulated container in this mode (%s)", testutil.Mode())
				}
				testBackend(t, u, container)
			})
		}
	}
}

func testBackend(t *testing.T, u testutil.User, container bool) {
	wd := testutil.Workdir(t, u.UID)
	cli := func(args ...string) outcome {
		t.Helper()
		c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: args, Container: container}
		return execute(t, c.Command())
	}

	// confine check says what a run would get.
	o := cli("check", "--json")
	var ck checkReport
	if err := json.Unmarshal([]byte(o.stdout), &ck); err != nil {
		t.Fatalf("check --json (exit %d): %v\n%s\n%s", o.code, err, o.stdout, o.stderr)
	}
	wantNS := !container
	if !container && !ck.Host.UserNS {
		t.Skipf("user namespaces do not work on this host (%s): only the core can be tested", ck.Host.UserNSErr)
	}
	if o.code != 0 {
		t.Fatalf("check: exit %d: %s", o.code, o.stderr)
	}
	want := "landlock+namespaces"
	if !wantNS {
		want = "landlock+seccomp"
		// The simulated container refuses namespaces with EPERM; on a host
		// whose user.max_user_namespaces is 0 (a kernel-matrix cell),
		// confine names that sysctl first, and only then.
		wantErr := []string{"operation not permitted"}
		if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
			wantErr = append(wantErr, "user.max_user_namespaces is 0")
		}
		refused := false
		for _, w := range wantErr {
			refused = refused || strings.Contains(ck.Host.UserNSErr, w)
		}
		if ck.Host.UserNS || !refused {
			t.Errorf("check in a container: user namespaces %v (%q), want refused with one of %q", ck.Host.UserNS, ck.Host.UserNSErr, wantErr)
		}
	}
	if ck.Backend != want {
		t.Fatalf("check: backend %q, want %q (skipped %v)", ck.Backend, want, ck.Skipped)
	}
	for _, g := range ck.Guarantees {
		if g.Name == "tree-kill" && strings.Contains(g.Mechanism, "PID namespace") != wantNS {
			t.Errorf("check: tree-kill mechanism %q (namespaces active: %v)", g.Mechanism, wantNS)
		}
	}
	t.Logf("check: backend %s, layers %v, user namespaces %v %s", ck.Backend, ck.Layers, ck.Host.UserNS, ck.Host.UserNSErr)

	// A file in another user's home, readable by everyone outside (the
	// control: this test stats and reads it).
	homeDir, err := os.MkdirTemp("/home", "confine-test-")
	if err != nil {
		t.Fatalf("create a home directory to hide: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(homeDir) })
	homeFile := filepath.Join(homeDir, "notes.txt")
	if err := os.WriteFile(homeFile, []byte("someone else's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(homeDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(homeFile); err != nil || len(b) == 0 {
		t.Fatalf("control: %s unreadable outside the sandbox: %v", homeFile, err)
	}
	// And a file in a directory that no root names (the control: this
	// test stats it): in / where this uid may create one, else in a
	// shared temporary directory (a non-root uid in a container).
	var outDir string
	for _, parent := range []string{"/", "/var/tmp", os.TempDir()} {
		if outDir, err = os.MkdirTemp(parent, "confine-test-"); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("create a directory outside every root: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(outDir) })
	outFile := filepath.Join(outDir, "data")
	if err := os.WriteFile(outFile, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(outDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(outFile); err != nil {
		t.Fatalf("control: %s cannot be stat()ed outside the sandbox: %v", outFile, err)
	}

	// A run: its parent, whether this test process exists for it, the
	// network interfaces it sees, and whether that home file exists.
	script := `echo "ppid=$PPID"; if [ -e /proc/$CONFINE_TEST_PID ]; then echo test-visible; else echo test-invisible; fi; "$0" __netifs; ` +
		`if [ -e "$CONFINE_TEST_HOMEFILE" ]; then echo home-visible; else echo home-invisible; fi; cat "$CONFINE_TEST_HOMEFILE" 2>/dev/null || echo home-unreadable; ` +
		`if [ -e "$CONFINE_TEST_OUTFILE" ]; then echo outside-visible; else echo outside-invisible; fi`
	o = cli("run", "--json", "--ro", probeDir, "--env", "CONFINE_TEST_PID="+strconv.Itoa(os.Getpid()),
		"--env", "CONFINE_TEST_HOMEFILE="+homeFile, "--env", "CONFINE_TEST_OUTFILE="+outFile, "--", "sh", "-c", script, probePath)
	var res spec.CommandResult
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
		t.Fatalf("run --json (exit %d): %v\n%s\n%s", o.code, err, o.stdout, o.stderr)
	}
	out := string(res.Stdout.Head)
	if res.ExitCode != 0 || res.Backend != want {
		t.Fatalf("run: exit %d backend %q, want 0 and %q; stdout %q stderr %q", res.ExitCode, res.Backend, want, out, res.Stderr.Head)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 {
		t.Fatalf("run printed %q", out)
	}
	if lines[4] != "home-unreadable" {
		t.Errorf("another user's home file was read inside the sandbox: %q", lines)
	}
	hasLayer := strings.Contains(strings.Join(res.Layers, ","), "pid-ns")
	switch {
	case wantNS:
		// The command's parent is the run's init, the test process has no
		// pid in the run's namespace, only loopback exists, and nothing
		// outside the roots exists.
		if lines[0] != "ppid=1" || lines[1] != "test-invisible" || lines[2] != "lo" || lines[3] != "home-invisible" ||
			lines[5] != "outside-invisible" || !hasLayer {
			t.Errorf("namespaces: got %q, layers %v; want ppid=1, test-invisible, lo only, home-invisible, outside-invisible, pid-ns layer", lines, res.Layers)
		}
	default:
		// Landlock does not control stat(): the core shows that other
		// processes and files exist (a documented limit), not what they hold.
		if lines[0] == "ppid=1" || lines[1] != "test-visible" || lines[3] != "home-visible" || lines[5] != "outside-visible" || hasLayer {
			t.Errorf("core: got %q, layers %v; want a host parent, the test, the home and the outside file visible (stat only), no namespace layer", lines, res.Layers)
		}
		if len(res.SkippedBackends) == 0 || res.SkippedBackends[0].Name != "landlock+namespaces" ||
			!strings.Contains(res.SkippedBackends[0].Reason, "user namespaces unavailable") {
			t.Errorf("core: skipped %v, want landlock+namespaces first, for user namespaces", res.SkippedBackends)
		}
	}
	t.Logf("run: backend %s; inside: %q; skipped %v", res.Backend, lines, res.SkippedBackends)

	// A profile that requires namespaces runs only where they work.
	prof := filepath.Join(wd, "ns.toml")
	if err := os.WriteFile(prof, []byte("name = \"needs-ns\"\nrequire_namespaces = true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o = cli("run", "--profile", prof, "--", "true")
	switch {
	case wantNS && o.code != 0:
		t.Errorf("require_namespaces where they work: exit %d: %s", o.code, o.stderr)
	case !wantNS && (o.code != 125 || !strings.Contains(o.stderr, "requires namespaces")):
		t.Errorf("require_namespaces in a container: exit %d, want 125 naming the missing namespaces: %s", o.code, o.stderr)
	}

	// Explicit backends: the core always; bubblewrap where bwrap is
	// installed and user namespaces work, else refused with the reason.
	o = cli("run", "--json", "--backend", "core", "--", "true")
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || res.Backend != "landlock+seccomp" {
		t.Errorf("--backend core: exit %d backend %q (%v): %s", o.code, res.Backend, err, o.stderr)
	}
	for _, sk := range ck.Skipped {
		if sk.Name == "bubblewrap" && sk.Reason == "" {
			t.Errorf("check: bubblewrap skipped without a reason")
		}
	}
	_, bwErr := exec.LookPath("bwrap")
	o = cli("run", "--json", "--backend", "bwrap", "--ro", probeDir, "--env", "CONFINE_TEST_PID="+strconv.Itoa(os.Getpid()),
		"--env", "CONFINE_TEST_HOMEFILE="+homeFile, "--env", "CONFINE_TEST_OUTFILE="+outFile, "--", "sh", "-c", script, probePath)
	switch {
	case bwErr != nil || !wantNS:
		// Not installed, or user namespaces blocked (the container).
		if o.code != 125 || !strings.Contains(o.stderr, "bubblewrap") {
			t.Errorf("--backend bwrap without bwrap or user namespaces: exit %d, want 125 naming bubblewrap: %s", o.code, o.stderr)
		}
		t.Logf("--backend bwrap refused as expected: %s", fx.OneLine(o.stderr, 300))
	default:
		res = spec.CommandResult{}
		if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || res.ExitCode != 0 || res.Backend != "bubblewrap" {
			t.Fatalf("--backend bwrap: exit %d backend %q (%v): %s %s", o.code, res.Backend, err, res.Stderr.Head, o.stderr)
		}
		lines := strings.Split(strings.TrimSpace(string(res.Stdout.Head)), "\n")
		layers := strings.Join(res.Layers, ",")
		if len(lines) != 6 || lines[0] != "ppid=1" || lines[1] != "test-invisible" || lines[2] != "lo" ||
			lines[3] != "home-invisible" || lines[4] != "home-unreadable" || lines[5] != "outside-invisible" ||
			!strings.Contains(layers, "bwrap") || !strings.Contains(layers, "pid-ns") {
			t.Errorf("bubblewrap: got %q, layers %v; want ppid=1, test-invisible, lo only, home-invisible, home-unreadable, outside-invisible, bwrap and pid-ns layers", lines, res.Layers)
		}
		for _, g := range res.Guarantees {
			if g.Name == "tree-kill" && !strings.Contains(g.Mechanism, "bubblewrap") {
				t.Errorf("bubblewrap: tree-kill mechanism %q", g.Mechanism)
			}
		}
		t.Logf("--backend bwrap: inside %q, layers %v", lines, res.Layers)
	}
	o = cli("run", "--backend", "namespaces", "--", "true")
	if wantNS != (o.code == 0) {
		t.Errorf("--backend namespaces: exit %d (namespaces available: %v): %s", o.code, wantNS, o.stderr)
	}
}

// Python's multiprocessing.Pool needs POSIX semaphores in /dev/shm: the
// namespaces give the run a private one; the core cannot grant the host's
// (a documented limit), so there it is only reported.
func TestPythonPoolPrivateShm(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skipf("not applicable on this host: no /usr/bin/python3: %v", err)
	}
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	py := "import multiprocessing as mp\nif __name__ == '__main__':\n    with mp.Pool(2) as p:\n        print(sum(p.map(abs, range(-10, 10))))\n"
	if err := os.WriteFile(filepath.Join(wd, "pool.py"), []byte(py), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, container := range []bool{false, true} {
		c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Container: container,
			Args: []string{"run", "--json", "--", "/usr/bin/python3", "pool.py"}}
		o := execute(t, c.Command())
		var res spec.CommandResult
		if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
			t.Fatalf("run --json (exit %d): %v\n%s", o.code, err, o.stderr)
		}
		ok := res.ExitCode == 0 && strings.TrimSpace(string(res.Stdout.Head)) == "100"
		switch {
		case res.Backend == "landlock+namespaces" && !ok:
			t.Errorf("multiprocessing.Pool under namespaces: exit %d, stdout %q, stderr %s", res.ExitCode, res.Stdout.Head, fx.OneLine(string(res.Stderr.Text()), 300))
		case res.Backend == "landlock+namespaces":
			t.Logf("namespaces: multiprocessing.Pool works (private /dev/shm)")
		default:
			t.Logf("%s: multiprocessing.Pool ok=%v (the host's /dev/shm is not granted; a documented limit)", res.Backend, ok)
		}
	}
}

var (
	bwrapMu     sync.Mutex
	bwrapReason = map[int]*string{}
)

// requireBwrap skips t, with confine's own reason, unless `confine run
// --backend bwrap -- true` works as u here.
func requireBwrap(t *testing.T, u testutil.User) {
	t.Helper()
	bwrapMu.Lock()
	defer bwrapMu.Unlock()
	if bwrapReason[u.UID] == nil {
		why := ""
		wd := testutil.Workdir(t, u.UID)
		o := cliRun(t, u, wd, nil, "run", "--backend", "bwrap", "--", "true")
		if o.code != 0 {
			why = fmt.Sprintf("exit %d: %s", o.code, fx.OneLine(o.stderr, 400))
		}
		bwrapReason[u.UID] = &why
	}
	if why := *bwrapReason[u.UID]; why != "" {
		t.Skipf("bubblewrap backend unavailable as %s (%s): %s", u.Name, testutil.Mode(), why)
	}
}
