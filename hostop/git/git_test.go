//go:build linux

package git

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

const asUserEnv = "CONFINE_GIT_TEST_AS_USER"

func TestMain(m *testing.M) {
	confine.Init()
	testutil.WrapContainer(true)
	code := m.Run()
	testutil.RemoveSharedDir()
	os.Exit(code)
}

// canaryEnv is what a hostile caller's environment might carry: every
// GIT_* variable that names a program or injects configuration.
func canaryEnv(canary string) []string {
	return []string{
		"GIT_EXTERNAL_DIFF=" + canary,
		"GIT_PAGER=" + canary,
		"GIT_EDITOR=" + canary,
		"GIT_SSH_COMMAND=" + canary,
		"GIT_CONFIG_COUNT=1",
		"GIT_CONFIG_KEY_0=core.fsmonitor",
		"GIT_CONFIG_VALUE_0=" + canary,
		"GIT_CONFIG_PARAMETERS='diff.external'='" + canary + "'",
	}
}

// fixture is a repository whose configuration, hooks and attributes point
// every executable setting at a canary script that appends to canary.log
// in the work tree (the one place a confined git could write, so a canary
// that ran under confinement is seen too).
type fixture struct {
	wd, canary, log string
	uid             int
}

func gitAs(t *testing.T, uid int, dir string, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e"}, env...)
	if os.Geteuid() == 0 && uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func newFixture(t *testing.T, unset ...string) *fixture {
	t.Helper()
	uid := os.Geteuid()
	wd := testutil.Workdir(t, uid)
	f := &fixture{wd: wd, canary: filepath.Join(wd, "canary.sh"), log: filepath.Join(wd, "canary.log"), uid: uid}
	run := func(args ...string) {
		t.Helper()
		if out, err := gitAs(t, uid, wd, nil, args...); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	write := func(name, body string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(wd, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
	}
	run("init", "-q", "-b", "main")
	run("config", "user.name", "Repo Owner")
	run("config", "user.email", "owner@example.invalid")
	write("a.txt", "one\n", 0o644)
	write("c.txt", "c\n", 0o644)
	run("add", "a.txt", "c.txt")
	run("commit", "-q", "-m", "first")
	// The work: a modified file, a staged change, an untracked file.
	write("a.txt", "two\n", 0o644)
	write("c.txt", "c2\n", 0o644)
	run("add", "c.txt")
	write("n.txt", "new\n", 0o644)

	// The traps, planted after the set-up so that it ran none of them.
	write("canary.sh", fmt.Sprintf("#!/bin/sh\necho \"$0 $*\" >> %s\nfor a; do [ -f \"$a\" ] && cat \"$a\" && exit 0; done\ncat\n", f.log), 0o755)
	c := f.canary
	for _, h := range []string{"pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-index-change", "reference-transaction", "pre-auto-gc", "post-checkout", "fsmonitor-watchman"} {
		write(filepath.Join(".git", "hooks", h), fmt.Sprintf("#!/bin/sh\nexec %s hook-%s \"$@\"\n", c, h), 0o755)
	}
	write("hooks2/pre-commit", "#!/bin/sh\nexec "+c+" hookspath \"$@\"\n", 0o755)
	write("inc.cfg", "[core]\n\thooksPath = "+filepath.Join(wd, "hooks2")+"\n\tfsmonitor = "+c+"\n", 0o644)
	for _, kv := range [][2]string{
		{"core.fsmonitor", c}, {"core.pager", c}, {"core.editor", c}, {"core.sshCommand", c},
		{"diff.external", c}, {"diff.canary.textconv", c}, {"diff.canary.command", c},
		{"filter.canary.clean", c}, {"filter.canary.smudge", c}, {"filter.canary.required", "true"},
		{"credential.helper", c}, {"gpg.program", c}, {"commit.gpgSign", "true"},
		{"include.path", filepath.Join(wd, "inc.cfg")}, {"includeIf.gitdir:/.path", filepath.Join(wd, "inc.cfg")},
		{"uploadpack.packObjectsHook", c}, {"protocol.file.allow", "always"},
		{"core.alternateRefsCommand", c}, {"sequence.editor", c}, {"pager.status", c}, {"pager.diff", c},
		{"alias.status", "!" + c},
	} {
		run("config", "--add", kv[0], kv[1])
	}
	for _, k := range unset {
		run("config", "--unset-all", k)
	}
	write(".gitattributes", "* filter=canary diff=canary\n", 0o644)
	write(".git/info/attributes", "* filter=canary diff=canary\n", 0o644)
	if os.Geteuid() != uid {
		t.Fatal("unreachable")
	}
	return f
}

func (f *fixture) ran() string {
	b, _ := os.ReadFile(f.log)
	return string(b)
}

// ops are the wrapper operations, each with the plain git command a user
// (or the agent's own tooling) would run on the host: the control.
var ops = []struct {
	name    string
	control []string
	do      func(ctx context.Context, r *Repo) (Result, error)
	// unset are configuration keys removed from both repositories (the
	// includes set core.hooksPath, which hides .git/hooks from the
	// control).
	unset []string
}{
	{"status", []string{"status"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Status(ctx) }, nil},
	{"diff", []string{"diff"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Diff(ctx, false) }, nil},
	{"diff-cached", []string{"diff", "--cached"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Diff(ctx, true) }, nil},
	{"log", []string{"log", "-p"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Log(ctx, 5, "") }, nil},
	{"show", []string{"show"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Show(ctx, "HEAD") }, nil},
	{"add", []string{"add", "n.txt"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Add(ctx, "n.txt") }, nil},
	{"commit", []string{"commit", "-m", "x"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Commit(ctx, "second\n") }, nil},
	{"commit-git-hooks", []string{"commit", "-m", "x"}, func(ctx context.Context, r *Repo) (Result, error) { return r.Commit(ctx, "second\n") }, []string{"include.path", "includeIf.gitdir:/.path", "commit.gpgSign"}},
}

func newRepo(t *testing.T, wd string) *Repo {
	t.Helper()
	e, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	c, err := e.MintHostOp("host", "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hostop.NewHost(c, wd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return New(h)
}

// TestCanary: after every wrapper operation the canary never ran, while
// the same operation with plain git on an identical repository runs it.
func TestCanary(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, op := range ops {
		t.Run(op.name, func(t *testing.T) {
			ctl := newFixture(t, op.unset...)
			env := canaryEnv(ctl.canary)
			out, _ := gitAs(t, ctl.uid, ctl.wd, env, op.control...)
			if ctl.ran() == "" {
				t.Fatalf("control: plain git %v ran no canary; the row proves nothing\n%s", op.control, out)
			}
			t.Logf("control: plain git %v ran: %s", op.control, strings.ReplaceAll(strings.TrimSpace(ctl.ran()), "\n", "; "))

			f := newFixture(t, op.unset...)
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			res, err := op.do(t.Context(), newRepo(t, f.wd))
			if err != nil {
				t.Fatalf("%s: %v\nstdout %s\nstderr %s", op.name, err, res.Stdout.Text(), res.Stderr.Text())
			}
			if got := f.ran(); got != "" {
				t.Fatalf("the canary ran under the wrapper: %s", got)
			}
			t.Logf("backend %s, stdout %d bytes", res.Backend, res.Stdout.Total)
		})
	}
}

// TestResults checks the wrappers' parsed results on a plain repository.
func TestResults(t *testing.T) {
	f := newFixture(t)
	for _, p := range []string{".gitattributes", ".git/info/attributes"} {
		_ = os.Remove(filepath.Join(f.wd, p))
	}
	r := newRepo(t, f.wd)
	ctx := t.Context()
	st, err := r.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range st.Status {
		got[e.Path] = e.X + e.Y
	}
	if got["a.txt"] != " M" || got["c.txt"] != "M " || got["n.txt"] != "??" {
		t.Errorf("status %v", st.Status)
	}
	d, err := r.Diff(ctx, false, "a.txt")
	if err != nil || !strings.Contains(d.Stdout.Text(), "+two") {
		t.Errorf("diff: %v %s", err, d.Stdout.Text())
	}
	if _, err := r.Add(ctx, "n.txt"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Commit(ctx, "second commit\n"); err != nil {
		t.Fatal(err)
	}
	lg, err := r.Log(ctx, 5, "")
	if err != nil || len(lg.Log) != 2 || lg.Log[0].Subject != "second commit" || lg.Log[0].Author != "Repo Owner" {
		t.Fatalf("log: %v %+v", err, lg.Log)
	}
	sh, err := r.Show(ctx, lg.Log[0].Hash)
	if err != nil || !strings.Contains(sh.Stdout.Text(), "+new") {
		t.Errorf("show: %v %s", err, sh.Stdout.Text())
	}
	// The plain git sees the commit the wrapper made.
	if out, err := gitAs(t, f.uid, f.wd, nil, "log", "--format=%s", "-n1"); err != nil || strings.TrimSpace(out) != "second commit" {
		t.Errorf("plain git log: %q %v", out, err)
	}
	for _, bad := range []struct {
		name string
		do   func() error
	}{
		{"rev-option", func() error { _, err := r.Show(ctx, "--output=/tmp/x"); return err }},
		{"rev-range", func() error { _, err := r.Log(ctx, 1, "HEAD..main"); return err }},
		{"path-dotdot", func() error { _, err := r.Add(ctx, "../x"); return err }},
		{"path-absolute", func() error { _, err := r.Add(ctx, "/etc/passwd"); return err }},
		{"empty-message", func() error { _, err := r.Commit(ctx, " \n"); return err }},
	} {
		if err := bad.do(); !errors.Is(err, ErrBadArg) {
			t.Errorf("%s: %v, want ErrBadArg", bad.name, err)
		}
	}
	ro, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := ro.MintHostOp("host-readonly", "test", 0)
	h, _ := hostop.NewHost(rc, f.wd)
	defer h.Close()
	if _, err := New(h).Commit(ctx, "x\n"); !errors.Is(err, spec.ErrCapability) {
		t.Errorf("read-only profile committed: %v", err)
	}
}

// TestAsUsers runs TestCanary again as uid 65534 when run as root.
func TestAsUsers(t *testing.T) {
	if os.Getenv(asUserEnv) != "" {
		t.Skip("already the re-executed run")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	for _, u := range testutil.Users(t) {
		if u.UID == os.Geteuid() {
			continue
		}
		t.Run(u.Name, func(t *testing.T) {
			bin := testutil.SelfBinary(t)
			tmp := testutil.Workdir(t, u.UID)
			cmd := exec.Command(bin, "-test.run", "^(TestCanary|TestResults)$", "-test.count=1")
			cmd.Env = []string{asUserEnv + "=" + strconv.Itoa(u.UID), "TMPDIR=" + tmp, "PATH=/usr/bin:/bin", "HOME=" + tmp}
			if testutil.SimulatingContainer() {
				cmd.Env = append(cmd.Env, testutil.SimulateContainerEnv+"=1")
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "PASS") {
				t.Fatalf("as %s: %v\n%s", u.Name, err, out)
			}
		})
	}
}

// The validators compile on first use; every pattern must compile (a bad
// one would panic only when a git operation first met it).
func TestPatternsCompile(t *testing.T) {
	all := map[string]func() *regexp.Regexp{"rev": revRE, "bool": boolRE, "head": headRE}
	for k, re := range inert {
		all[k] = re
	}
	for name, re := range all {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: %v", name, r)
				}
			}()
			if re() == nil {
				t.Errorf("%s: nil", name)
			}
		}()
	}
}
