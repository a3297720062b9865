//go:build linux

package escape

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// Tier 1 rows (issue 22): host operations, which run no command, against
// the persistence guard (confine fs write and fs patch into git metadata)
// and against the root (confine git reading through a symlink in .git
// that leads out of it). Each row's control does the same with plain host
// tools (sh, patch, git) as the same user and must show the effect; the
// confine operation must be refused, show no effect, and echo nothing of
// the outside file.

// t1fixture is one Tier 1 row's setup.
type t1fixture struct {
	control string   // sh -c script, run unconfined in the work tree, $0 = target
	target  string   // the file a write row writes (from the work tree)
	cli     []string // confine arguments (fs ..., git ...), run in the work tree
	stdin   string   // standard input of both
	// effect reports whether the attack happened (a planted file, a
	// changed one); with leak, the effect is also "leak appears in the
	// output".
	effect fx.Effect
	leak   string
	// status is the exit status the confined operation must end with.
	status int
}

type t1case struct {
	name  string
	setup func(e *env) t1fixture
}

// Exit statuses of refused Tier 1 operations (internal/cli).
const (
	t1ExitGuard   = 121 // the persistence guard
	t1ExitConfine = 125 // any other refusal
)

const fsmonitor = "[core]\n\tfsmonitor = touch PWNED\n"

func tier1Vectors() []t1case {
	// repo: a work tree with .git (config, an existing hook), a nested
	// repository under vendor/, and an absorbed submodule (gitfile into
	// .git/modules).
	repo := func(e *env) {
		for _, f := range []string{".git/config", ".git/HEAD", ".git/modules/sub/config", ".git/modules/sub/HEAD",
			"vendor/lib/.git/config", "vendor/lib/.git/HEAD", "src/main.c"} {
			e.file(e.wd, f, 0o644)
		}
		e.file(e.wd, ".git/hooks/pre-commit", 0o755)
		gf := e.file(e.wd, "sub/.git", 0o644)
		if err := os.WriteFile(gf, []byte("gitdir: ../.git/modules/sub\n"), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	write := func(rel, data string) func(e *env) t1fixture {
		return func(e *env) t1fixture {
			repo(e)
			p := filepath.Join(e.wd, rel)
			eff := fx.Exists(p)
			if b, err := os.ReadFile(p); err == nil {
				eff = fx.ContentChanged(p, string(b))
			}
			return t1fixture{control: `mkdir -p "$(dirname "$0")" && cat > "$0"`, target: rel, cli: []string{"fs", "write", rel}, stdin: data, effect: eff, status: t1ExitGuard}
		}
	}
	patch := func(rel string, create bool) func(e *env) t1fixture {
		return func(e *env) t1fixture {
			repo(e)
			p := filepath.Join(e.wd, rel)
			diff := "--- a/" + rel + "\n+++ b/" + rel + "\n@@ -1 +1 @@\n-" + original + "+" + fsmonitor
			eff := contentChanged(p)
			if create {
				diff = "--- /dev/null\n+++ b/" + rel + "\n@@ -0,0 +1 @@\n+touch PWNED\n"
				eff = fx.Exists(p)
			}
			return t1fixture{control: `patch -s -p1`, target: rel, cli: []string{"fs", "patch"}, stdin: diff, effect: eff, status: t1ExitGuard}
		}
	}
	// gitRepo: a real repository with one commit, made by git as the user.
	gitRepo := func(e *env) {
		for _, args := range [][]string{{"init", "-q", "-b", "main", "."}, {"commit", "-q", "--allow-empty", "-m", "first"}} {
			if out, err := e.gitCmd(args...).CombinedOutput(); err != nil {
				e.t.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
	}
	// gitOut: .git/name becomes a symlink to a file outside the root that
	// holds content; the control runs git (the plain host tool) and the
	// row runs confine git with args.
	gitOut := func(name, content, control string, args ...string) func(e *env) t1fixture {
		return func(e *env) t1fixture {
			gitRepo(e)
			secret := e.outsideFile("secret-" + strings.ReplaceAll(name, "/", "-"))
			if err := os.WriteFile(secret, []byte(content), 0o644); err != nil {
				e.t.Fatal(err)
			}
			p := filepath.Join(e.wd, ".git", name)
			_ = os.Remove(p)
			e.symlink(secret, p)
			return t1fixture{control: control, cli: append([]string{"git"}, args...), leak: "SECRET-OUTSIDE", status: t1ExitConfine}
		}
	}
	// withProfile: the row under a tier 1 profile file whose [guard]
	// refuses .envrc (an editor row moved) and any Makefile (a row of its
	// own), written beside the work tree.
	withProfile := func(f func(e *env) t1fixture) func(e *env) t1fixture {
		return func(e *env) t1fixture {
			x := f(e)
			e.file(e.wd, ".envrc", 0o644)
			e.file(e.wd, "src/Makefile", 0o644)
			prof := filepath.Join(e.freshDir("t1-profile-"), "t1-guard.toml")
			text := "name = \"t1-guard\"\ntier = 1\nhost_ops = [\"write_file\", \"apply_patch\"]\n[guard]\nrefuse = [\"envrc\"]\n" +
				"[guard.add.makefile]\npattern = \"**/Makefile\"\naction = \"refuse\"\n"
			if err := os.WriteFile(prof, []byte(text), 0o644); err != nil {
				e.t.Fatal(err)
			}
			x.cli = append([]string{x.cli[0], x.cli[1], "--profile", prof}, x.cli[2:]...)
			if x.effect != nil && x.target != "" {
				x.effect = contentChanged(filepath.Join(e.wd, x.target))
			}
			return x
		}
	}
	return []t1case{
		{"t1-fs-write-profile-added-refused", withProfile(write("src/Makefile", "all:\n\ttouch PWNED\n"))},
		{"t1-fs-patch-profile-added-refused", withProfile(patch("src/Makefile", false))},
		{"t1-fs-write-profile-moved-refused", withProfile(write(".envrc", "touch PWNED\n"))},
		{"t1-fs-write-git-config", write(".git/config", fsmonitor)},
		{"t1-fs-patch-git-config", patch(".git/config", false)},
		{"t1-fs-write-hook-overwrite", write(".git/hooks/pre-commit", "#!/bin/sh\ntouch PWNED\n")},
		{"t1-fs-write-hook-new", write(".git/hooks/post-checkout", "#!/bin/sh\ntouch PWNED\n")},
		{"t1-fs-patch-hook-new", patch(".git/hooks/pre-push", true)},
		{"t1-fs-write-git-info", write(".git/info/attributes", "* filter=evil\n")},
		{"t1-fs-write-nested-repo-config", write("vendor/lib/.git/config", fsmonitor)},
		{"t1-fs-patch-nested-repo-config", patch("vendor/lib/.git/config", false)},
		{"t1-fs-write-absorbed-submodule-config", write(".git/modules/sub/config", fsmonitor)},
		{"t1-fs-write-submodule-gitfile", write("sub/.git", "gitdir: ../planted\n")},
		{"t1-fs-write-new-git-dir", write("src/.git/config", fsmonitor)},
		{"t1-fs-write-new-gitfile", write("src/.git", "gitdir: ../planted\n")},
		{"t1-git-packed-refs-out", gitOut("packed-refs", "SECRET-OUTSIDE line one\n", `git status`, "status")},
		{"t1-git-config-out", gitOut("config", "[user]\n\tname = SECRET-OUTSIDE\n\temail = s@e\n", `git config user.name`, "status")},
		{"t1-git-head-out", func(e *env) t1fixture {
			// git takes a symlinked HEAD only when it names something
			// under refs/: HEAD -> refs/heads/link, which leads out.
			f := gitOut("refs/heads/link", "ref: refs/heads/SECRET-OUTSIDE\n", `git status`, "status")(e)
			head := filepath.Join(e.wd, ".git", "HEAD")
			if err := os.Remove(head); err != nil {
				e.t.Fatal(err)
			}
			e.symlink("refs/heads/link", head)
			return f
		}},
		{"t1-git-ref-out", gitOut("refs/heads/main", "ref: refs/heads/SECRET-OUTSIDE\n", `git log -1`, "log")},
		{"t1-git-alternates-out", func(e *env) t1fixture {
			// An object store outside the root, named by alternates: git
			// shows its commits.
			gitRepo(e)
			other := e.freshDir("t1-other-")
			ge := &env{t: e.t, user: e.user, wd: other}
			for _, args := range [][]string{{"init", "-q", "."}, {"commit", "-q", "--allow-empty", "-m", "SECRET-OUTSIDE"}} {
				if out, err := ge.gitCmd(args...).CombinedOutput(); err != nil {
					e.t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			out, err := ge.gitCmd("rev-parse", "HEAD").Output()
			if err != nil {
				e.t.Fatal(err)
			}
			hash := strings.TrimSpace(string(out))
			alt := e.file(e.wd, ".git/objects/info/alternates", 0o644)
			if err := os.WriteFile(alt, []byte(filepath.Join(other, ".git", "objects")+"\n"), 0o644); err != nil {
				e.t.Fatal(err)
			}
			return t1fixture{control: "git show --no-patch " + hash, cli: []string{"git", "show", hash}, leak: "SECRET-OUTSIDE", status: t1ExitConfine}
		}},
	}
}

// gitCmd is git as the env's user in its work tree, with no global or
// system configuration.
func (e *env) gitCmd(args ...string) *exec.Cmd {
	cmd := exec.Command("git", args...)
	cmd.Dir = e.wd
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + e.wd, "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@e", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@e"}
	if os.Geteuid() == 0 && e.user.UID != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(e.user.UID), Gid: uint32(e.user.UID)}}
	}
	return cmd
}

// escaped is the row's verdict on one phase: its effect, or the leak in
// its output.
func (f t1fixture) escaped(o outcome) (bool, string) {
	if f.leak != "" && strings.Contains(o.stdout+o.stderr, f.leak) {
		return true, fmt.Sprintf("the output holds %q from outside the root", f.leak)
	}
	if f.effect != nil {
		return f.effect()
	}
	return false, "no effect"
}

func TestEscapeTier1(t *testing.T) {
	cases := tier1Vectors()
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, vc := range cases {
				t.Run(vc.name, func(t *testing.T) { runTier1(t, u, vc) })
			}
		})
	}
}

func runTier1(t *testing.T, u testutil.User, vc t1case) {
	cell := &matrixCell{control: "?", confined: "-"}
	recordCell(vc.name, u.Name, cell)

	// Control: the plain host tool, as the user.
	ce := newEnv(t, u, false)
	cf := vc.setup(ce)
	for _, tool := range []string{"git", "patch"} {
		if strings.Contains(cf.control, tool+" ") {
			if _, err := exec.LookPath(tool); err != nil {
				t.Skipf("the control needs %s, which is not installed (.ci/run installs it)", tool)
			}
		}
	}
	cmd := exec.Command("sh", "-c", cf.control, filepath.Join(ce.wd, cf.target))
	cmd.Dir = ce.wd
	cmd.Env = append(ce.gitCmd().Env, "HOME="+ce.wd)
	cmd.SysProcAttr = ce.gitCmd().SysProcAttr
	cmd.Stdin = strings.NewReader(cf.stdin)
	co := execute(t, cmd)
	esc, why := cf.escaped(co)
	if !esc {
		cell.control = "ERROR"
		t.Fatalf("control did not show the effect (%s; %s)\nstdout: %s\nstderr: %s", co.brief(), why, co.stdout, co.stderr)
	}
	cell.control = "escaped"
	t.Logf("control: escaped (%s; %s)", co.brief(), why)

	// Confined: the Tier 1 operation.
	fe := newEnv(t, u, true)
	ff := vc.setup(fe)
	c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: fe.wd, Args: append(append([]string{}, ff.cli[0], "--root", fe.wd), ff.cli[1:]...)}
	ccmd := c.Command()
	ccmd.Stdin = strings.NewReader(ff.stdin)
	fo := execute(t, ccmd)
	if esc, why := ff.escaped(fo); esc {
		cell.confined = "ESCAPED"
		t.Fatalf("confine %s escaped as %s: %s\nconfined: %s\nstdout: %s\nstderr: %s", strings.Join(ff.cli, " "), u.Name, why, fo.brief(), fo.stdout, fo.stderr)
	}
	if fo.code != ff.status {
		cell.confined = "WRONG STATUS"
		t.Fatalf("confine %s: %s, want exit %d\nstdout: %s\nstderr: %s", strings.Join(ff.cli, " "), fo.brief(), ff.status, fo.stdout, fo.stderr)
	}
	cell.confined = "blocked: " + fx.OneLine(fo.stderr, 70)
	t.Logf("control: escaped; confined: blocked (%s: %s)", fo.brief(), fx.OneLine(fo.stderr, 200))
}
