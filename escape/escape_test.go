//go:build linux

package escape

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/confine-sandbox/confine"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/cli"
	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// The probe, built once by TestMain into <SharedDir>/bin, which every
// confined run gets read-only (--ro) and nothing else of SharedDir.
var (
	probePath string
	probeDir  string
	goCommand string // the go command that built it, for the functional tests
	// sharedPrefix is SharedDir with a trailing slash, shortened to "$S/"
	// in the matrix.
	sharedPrefix = "\x00"
)

// controlPATH is the PATH of unconfined (control) runs, the same one
// testutil.CLI gives the CLI.
const controlPATH = "PATH=/usr/local/bin:/usr/bin:/bin"

// Run limits: the probe reports within 60s on its own; these only keep a
// wedged run from eating the whole test timeout.
// runLimit is a variable only so that a slow emulated guest can raise it
// (CONFINE_TEST_RUN_LIMIT, runlimit_test.go).
var runLimit = 3 * time.Minute

const (
	controlSettle  = testutil.Patience      // how long a control's asynchronous effect may take (it ends on the effect)
	confinedSettle = 300 * time.Millisecond // how long to watch for one after a confined run
)

func TestMain(m *testing.M) {
	// This binary is also the suite's confine CLI (CLIEnv): its runs
	// re-execute it as their helpers.
	confine.Init()
	testutil.WrapContainer(false)
	if os.Getenv(testutil.CLIEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(mainTests(m))
}

// mainTB lets TestMain use testutil.SharedDir, which needs a testing.TB
// only to report failure.
type mainTB struct{ testing.TB }

func (mainTB) Helper() {}
func (mainTB) Fatalf(format string, a ...any) {
	panic(fmt.Sprintf(format, a...))
}

func mainTests(m *testing.M) (code int) {
	var shared string
	func() {
		defer func() {
			if r := recover(); r != nil {
				fmt.Fprintf(os.Stderr, "FAIL: escape suite: shared test directory: %v\n", r)
			}
		}()
		shared = testutil.SharedDir(mainTB{})
	}()
	if shared == "" {
		return 1
	}
	defer os.RemoveAll(shared)
	if err := buildProbe(shared); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: escape suite: cannot build the probe: %v\n", err)
		return 1
	}
	code = m.Run()
	testutil.StopServers()
	printMatrix(os.Stdout)
	return code
}

// buildProbe builds ./escape/probe (static, CGO_ENABLED=0) into shared/bin.
func buildProbe(shared string) error {
	pre := os.Getenv(prebuiltProbeEnv)
	goBin, err := exec.LookPath("go")
	if err != nil && pre == "" {
		return fmt.Errorf("the go command is not on PATH (%v); the escape suite needs it to build escape/probe", err)
	}
	// With a prebuilt probe the go command is optional (the arm64 guest
	// has none): the tests that need it skip, saying so.
	goCommand = goBin
	root := ""
	if goBin != "" {
		if out, err := exec.Command(goBin, "env", "GOMOD").Output(); err == nil {
			if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
				root = filepath.Dir(gomod)
			}
		}
	}
	if root == "" {
		if root, err = filepath.Abs(".."); err != nil {
			return err
		}
	}
	bin := filepath.Join(shared, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return err
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		return err
	}
	out := filepath.Join(bin, "probe")
	if pre != "" {
		if err := testutil.CopyFile(pre, out, 0o755); err != nil {
			return fmt.Errorf("%s: %v", prebuiltProbeEnv, err)
		}
	} else {
		cmd := exec.Command(goBin, "build", "-o", out, "./escape/probe")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build ./escape/probe in %s: %v\n%s", root, err, b)
		}
	}
	if err := os.Chmod(out, 0o755); err != nil {
		return err
	}
	probePath, probeDir = out, bin
	sharedPrefix = shared + "/"
	return nil
}

// prebuiltProbeEnv names a probe binary built beforehand (CGO_ENABLED=0 go
// build ./escape/probe) for the suite to use instead of building one: the
// CI's kernel matrix sets it, because a build inside an emulated guest
// costs a minute per boot.
const prebuiltProbeEnv = "CONFINE_ESCAPE_PROBE"

// probeReport is the probe's JSON line.
type probeReport = fx.Report

// outcome is one finished run, of the probe directly or of the CLI.
type outcome struct {
	code           int // exit status, 128+N for death by signal N
	signal         syscall.Signal
	limitHit       bool // the harness killed it after runLimit
	stdout, stderr string
	report         probeReport
	hasReport      bool
	elapsed        time.Duration
}

// brief renders the outcome for logs: "exit 1, blocked: connect: EPERM".
func (o outcome) brief() string {
	var b strings.Builder
	switch {
	case o.limitHit:
		fmt.Fprintf(&b, "killed by the harness after %v", runLimit)
	case o.signal != 0:
		fmt.Fprintf(&b, "killed by signal %d (%v)", int(o.signal), o.signal)
	default:
		fmt.Fprintf(&b, "exit %d", o.code)
	}
	if o.hasReport {
		fmt.Fprintf(&b, ", %s: %s", o.report.Outcome, fx.OneLine(o.report.Detail, 400))
	} else {
		fmt.Fprintf(&b, ", no probe report")
		if s := strings.TrimSpace(o.stderr); s != "" {
			fmt.Fprintf(&b, "; stderr: %s", fx.OneLine(s, 400))
		}
	}
	return b.String()
}

// execute runs cmd to completion (at most runLimit) and parses the last
// probe JSON line of its stdout.
func execute(t *testing.T, cmd *exec.Cmd) outcome {
	t.Helper()
	var so, se bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &so
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &se
	}
	// A descendant that keeps the output pipes open must not hang the test.
	cmd.WaitDelay = 10 * time.Second
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	var mu sync.Mutex
	limitHit := false
	timer := time.AfterFunc(runLimit, func() {
		mu.Lock()
		limitHit = true
		mu.Unlock()
		_ = cmd.Process.Kill() // our own child, by its pid
	})
	err := cmd.Wait()
	timer.Stop()
	o := outcome{stdout: so.String(), stderr: se.String(), elapsed: time.Since(start)}
	mu.Lock()
	o.limitHit = limitHit
	mu.Unlock()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		t.Fatalf("wait %v: %v", cmd.Args, err)
	}
	o.code, o.signal = fx.ExitStatus(cmd.ProcessState)
	o.report, o.hasReport = fx.LastReport(o.stdout)
	return o
}

// env is one phase (control or confined) of one vector for one user.
type env struct {
	t        *testing.T
	user     testutil.User
	confined bool
	backend  string // --backend of the confined run ("": the default selection)
	wd       string // the work directory, owned by the user
	out      string // a fresh "outside" directory, owned by the user (lazy)
}

func newEnv(t *testing.T, u testutil.User, confined bool) *env {
	return &env{t: t, user: u, confined: confined, wd: testutil.Workdir(t, u.UID)}
}

// settle is how long to wait for an asynchronous effect: long enough for a
// control's to surely arrive, short after a confined run (whose attempt
// is over by the time the CLI returned).
func (e *env) settle() time.Duration {
	if e.confined {
		return confinedSettle
	}
	return controlSettle
}

// fixture is what a vector's setup returns for one phase.
type fixture struct {
	args    []string // probe arguments after the vector name
	command []string // replaces "probe VECTOR args..." when set
	cliArgs []string // extra `confine run` flags (confined phase only)
	env     []string // environment of the CLI (confined) or of the probe (control)
	stdin   *os.File
	extra   []*os.File // ExtraFiles of the launched process (fd 3...)
	ctty    bool       // launched process: new session, stdin as controlling terminal

	// effect reports whether the attack's side effect happened. The
	// control must show it when it reports escaped; the confined run
	// must not.
	effect func() (bool, string)
	// intact, checked after the confined run only, is what must still hold
	// (the target process alive and untraced...).
	intact func() error
	// judge replaces exit code and effect as the verdict "escaped".
	judge func(o outcome) (bool, string)
	// probeMayEscape: in the confined run the probe's own exit 0 is not the
	// verdict, only effect is (setsid-daemon: the daemon may run while the
	// sandbox does; it must not outlive it).
	probeMayEscape bool
	// mustReport: a confined run that produces no probe report (confine
	// refused, or the probe died) fails instead of counting as blocked.
	mustReport bool
	// mayRefuse: the confined run may be refused by confine (exit 125)
	// as its outcome; without it a refusal fails the row, since the
	// attack was never attempted.
	mayRefuse bool
}

func (f *fixture) argv(vector string) []string {
	if f.command != nil {
		return f.command
	}
	return append([]string{probePath, vector}, f.args...)
}

func (f *fixture) applyIO(cmd *exec.Cmd) {
	if f.stdin != nil {
		cmd.Stdin = f.stdin
	}
	cmd.ExtraFiles = f.extra
	if f.ctty {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setsid = true
		cmd.SysProcAttr.Setctty = true
		cmd.SysProcAttr.Ctty = 0
	}
}

// runControl runs the attempt unconfined, as the user, in the work
// directory.
func runControl(e *env, vector string, f *fixture) outcome {
	e.t.Helper()
	argv := f.argv(vector)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = e.wd
	// exec.Cmd keeps the last of duplicate variables: f.env wins.
	cmd.Env = append([]string{controlPATH, "HOME=" + e.wd, "LANG=C.UTF-8"}, f.env...)
	if os.Geteuid() == 0 && e.user.UID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.user.UID), Gid: uint32(e.user.UID)}}
	}
	f.applyIO(cmd)
	return execute(e.t, cmd)
}

// runConfined runs the attempt under `confine run` as the user.
func runConfined(e *env, vector string, f *fixture) outcome {
	e.t.Helper()
	args := []string{"run", "--workdir", e.wd, "--ro", probeDir}
	if e.backend != "" {
		args = append(args, "--backend", e.backend)
	}
	args = append(args, f.cliArgs...)
	args = append(args, "--")
	args = append(args, f.argv(vector)...)
	c := testutil.CLI{Bin: testutil.SelfBinary(e.t), UID: e.user.UID, Dir: e.wd, Env: f.env, Args: args}
	cmd := c.Command()
	f.applyIO(cmd)
	return execute(e.t, cmd)
}

// vcase is one row of the escape table.
type vcase struct {
	name   string // subtest name
	vector string // probe vector
	setup  func(e *env) fixture
	// knownGap, when set, names the issue that will close this vector: a
	// confined run that escapes is skipped with this reason (loudly), not
	// failed. It never hides a pass.
	knownGap string
	// ownUID: the unprivileged pass runs as testutil.UnusedUID, a uid of
	// this test process alone, instead of NobodyUID, when the suite runs as
	// root. For rows whose bound is RLIMIT_NPROC, which counts every task
	// of the uid on the host: another process of uid 65534 (another test
	// run, a daemon) would count against it.
	ownUID bool
}

func TestEscape(t *testing.T) {
	cases := vectors()
	seen := map[string]bool{}
	for _, vc := range cases {
		if seen[vc.name] {
			t.Fatalf("duplicate vector row %q", vc.name)
		}
		seen[vc.name] = true
	}
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, vc := range cases {
				t.Run(vc.name, func(t *testing.T) { runVector(t, u, vc, "") })
			}
		})
	}
}

// TestEscapeBwrap is the whole vector table again with every confined run
// under `--backend bwrap` (controls as in TestEscape). Where bubblewrap
// cannot run (not installed, user namespaces blocked) it is skipped with
// the reason confine gives.
func TestEscapeBwrap(t *testing.T) {
	cases := vectors()
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			requireBwrap(t, u)
			for _, vc := range cases {
				t.Run(vc.name, func(t *testing.T) { runVector(t, u, vc, "bwrap") })
			}
		})
	}
}

func runVector(t *testing.T, u testutil.User, vc vcase, backend string) {
	cell := &matrixCell{control: "?", confined: "-"}
	column := u.Name
	if backend != "" {
		column += "+" + backend
	}
	recordCell(vc.name, column, cell)
	if vc.ownUID && u.UID != 0 && os.Geteuid() == 0 {
		u.UID = testutil.UnusedUID(t)
		t.Logf("as uid %d, which no other process on this host runs as, instead of %d (RLIMIT_NPROC counts the uid's tasks host-wide)", u.UID, testutil.NobodyUID)
	}

	// Control: unconfined, as the user. It must really escape.
	ce := newEnv(t, u, false)
	cf := vc.setup(ce)
	co := runControl(ce, vc.vector, &cf)
	var escaped bool
	var why string
	switch {
	case cf.judge != nil:
		escaped, why = cf.judge(co)
	case co.code != 0:
		escaped, why = false, co.brief()
	case cf.effect != nil:
		ok, d := cf.effect()
		if !ok {
			cell.control = "ERROR"
			t.Fatalf("control (%s) reported escaped but the harness saw no effect (%s): fixture bug?\nstdout: %s\nstderr: %s", co.brief(), d, co.stdout, co.stderr)
		}
		escaped, why = true, co.brief()+"; harness saw: "+d
	default:
		escaped, why = true, co.brief()
	}
	if !escaped {
		cell.control = "n/a: " + shortDetail(co)
		t.Logf("control: did not escape (%s)", why)
		t.Skipf("not applicable on this host as %s: control did not escape: %s", u.Name, why)
	}
	cell.control = "escaped"
	t.Logf("control: escaped (%s)", why)

	// Confined: the same attempt under confine run. It must not escape.
	fe := newEnv(t, u, true)
	fe.backend = backend
	ff := vc.setup(fe)
	fo := runConfined(fe, vc.vector, &ff)
	var problems []string
	if ff.judge != nil {
		if esc, d := ff.judge(fo); esc {
			problems = append(problems, "escaped: "+d)
		}
	} else {
		if fo.code == 0 && !ff.probeMayEscape {
			problems = append(problems, "exit status 0: the probe reports the attack worked")
		}
		if ff.effect != nil {
			if ok, d := ff.effect(); ok {
				problems = append(problems, "the harness saw the effect: "+d)
			}
		}
	}
	if ff.intact != nil {
		if err := ff.intact(); err != nil {
			problems = append(problems, "the target was harmed: "+err.Error())
		}
	}
	stderr := strings.TrimSpace(fo.stderr)
	if len(problems) > 0 {
		cell.confined = "ESCAPED"
		msg := fmt.Sprintf("confined run escaped as %s: %s\nconfined: %s\ncontrol: escaped (%s)\nstdout: %s\nstderr: %s",
			u.Name, strings.Join(problems, "; "), fo.brief(), why, fo.stdout, stderr)
		if vc.knownGap != "" {
			cell.confined = "ESCAPED (known gap)"
			t.Skipf("KNOWN GAP, %s: %s", vc.knownGap, msg)
		}
		t.Fatal(msg)
	}
	if fo.code == 125 && !fo.hasReport && !ff.mayRefuse {
		// confine itself refused (or failed to start) the run: nothing
		// was attempted, so it proves nothing about the vector.
		cell.confined = "REFUSED"
		t.Fatalf("confine refused the run, so the attack was never attempted (%s)\nstderr: %s", fo.brief(), stderr)
	}
	if ff.mustReport && !(fo.hasReport && fo.report.Outcome == "blocked") {
		cell.confined = "NO REPORT"
		t.Fatalf("confined run did not report blocked (%s)\nstderr: %s", fo.brief(), stderr)
	}
	cell.confined = "blocked: " + shortDetail(fo)
	if ff.probeMayEscape && ff.effect != nil {
		_, d := ff.effect()
		cell.confined = "blocked: " + fx.OneLine(d, 60)
	}
	if stderr != "" {
		t.Logf("confined stderr: %s", fx.OneLine(stderr, 300))
	}
	t.Logf("control: escaped (%s); confined: blocked (%s)", why, fo.brief())
}

// shortDetail is the matrix text for an outcome.
func shortDetail(o outcome) string {
	switch {
	case o.hasReport:
		return fx.OneLine(strings.ReplaceAll(o.report.Detail, sharedPrefix, "$S/"), 70)
	case o.signal != 0:
		return fmt.Sprintf("killed by %v", o.signal)
	default:
		return fmt.Sprintf("exit %d: %s", o.code, fx.OneLine(o.stderr, 50))
	}
}

// The matrix of vector x user, printed after the run.
type matrixCell struct{ control, confined string }

var (
	matrixMu    sync.Mutex
	matrix      = map[string]map[string]*matrixCell{}
	matrixOrder []string
	matrixUsers []string
)

func recordCell(vector, user string, c *matrixCell) {
	matrixMu.Lock()
	defer matrixMu.Unlock()
	if matrix[vector] == nil {
		matrix[vector] = map[string]*matrixCell{}
		matrixOrder = append(matrixOrder, vector)
	}
	matrix[vector][user] = c
	found := false
	for _, u := range matrixUsers {
		found = found || u == user
	}
	if !found {
		matrixUsers = append(matrixUsers, user)
	}
}

func printMatrix(w io.Writer) {
	matrixMu.Lock()
	defer matrixMu.Unlock()
	if len(matrixOrder) == 0 {
		return
	}
	fmt.Fprintf(w, "\nescape matrix (control -> confined), %s, per user %s; $S is %s:\n", testutil.Mode(), strings.Join(matrixUsers, ", "), strings.TrimSuffix(sharedPrefix, "/"))
	counts := map[string]int{}
	for _, v := range matrixOrder {
		var parts []string
		for _, u := range matrixUsers {
			c := matrix[v][u]
			if c == nil {
				parts = append(parts, u+": -")
				continue
			}
			ctl := c.control
			if strings.HasPrefix(ctl, "n/a") {
				counts["n/a"]++
			}
			conf := c.confined
			switch {
			case strings.HasPrefix(conf, "blocked"):
				counts["blocked"]++
			case strings.HasPrefix(conf, "ESCAPED"):
				counts["ESCAPED"]++
			}
			parts = append(parts, fmt.Sprintf("%s: %s -> %s", u, fx.OneLine(ctl, 50), conf))
		}
		fmt.Fprintf(w, "  %-28s %s\n", v, strings.Join(parts, " | "))
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sum []string
	for _, k := range keys {
		sum = append(sum, fmt.Sprintf("%s %d", k, counts[k]))
	}
	fmt.Fprintf(w, "  totals: %s\n", strings.Join(sum, ", "))
}
