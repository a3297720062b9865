//go:build linux

package hostop

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// gitTree is a work tree with the git shapes the guard keeps: its own
// .git, a nested repository, an absorbed submodule (gitfile into
// .git/modules), a bare repository, a git directory named by a gitfile
// elsewhere in the tree, and one half built (HEAD and objects/, no refs/).
func gitTree(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "repo")
	for _, f := range []string{
		".git/config", ".git/HEAD", ".git/hooks/pre-commit", ".git/info/exclude", ".git/packed-refs",
		".git/modules/sub/config", ".git/modules/sub/HEAD",
		"vendor/lib/.git/config", "vendor/lib/.git/hooks/post-checkout",
		"bare.git/HEAD", "bare.git/objects/.keep", "bare.git/refs/.keep",
		"elsewhere/gd/HEAD", "elsewhere/gd/objects/.keep", "elsewhere/gd/refs/.keep",
		"half/HEAD", "half/objects/.keep",
		"src/main.c", ".envrc",
	} {
		p := filepath.Join(root, f)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte("orig\n"), 0o644))
	}
	must(t, os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "linked"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "sub", ".git"), []byte("gitdir: ../.git/modules/sub\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(root, "linked", ".git"), []byte("gitdir: ../elsewhere/gd\n"), 0o644))
	return root
}

func TestGuardWrites(t *testing.T) {
	rows := []struct {
		name, path string
		op         string // "write", "patch-modify", "patch-create", "remove"
		row        string // the protected-set row; "" for an ordinary file
		refused    bool   // by default (the git set)
	}{
		{"config", ".git/config", "write", "git-config", true},
		{"config-patch", ".git/config", "patch-modify", "git-config", true},
		{"hook-overwrite", ".git/hooks/pre-commit", "write", "git-hooks", true},
		{"hook-new", ".git/hooks/post-checkout", "write", "git-hooks", true},
		{"hook-new-patch", ".git/hooks/post-merge", "patch-create", "git-hooks", true},
		{"info", ".git/info/attributes", "write", "git-info", true},
		{"packed-refs", ".git/packed-refs", "patch-modify", "git-metadata", true},
		{"absorbed-submodule-config", ".git/modules/sub/config", "write", "git-modules", true},
		{"absorbed-submodule-gitfile", "sub/.git", "write", "git-dir", true},
		{"absorbed-submodule-gitfile-delete", "sub/.git", "patch-delete", "git-dir", true},
		{"nested-config", "vendor/lib/.git/config", "write", "git-config", true},
		{"nested-hook", "vendor/lib/.git/hooks/post-checkout", "patch-modify", "git-hooks", true},
		{"remove-gitfile", "sub/.git", "remove", "git-dir", true},
		{"new-git-dir", "src/.git/config", "write", "git-config", true},
		{"new-gitfile", "src/.git", "patch-create", "git-dir", true},
		{"case-folded", ".GIT/config", "write", "git-config", true},
		{"bare-config", "bare.git/config", "write", "git-directory", true},
		{"bare-hook", "bare.git/hooks/pre-receive", "patch-create", "git-directory", true},
		{"gitfile-target", "elsewhere/gd/config", "write", "git-directory", true},
		{"half-built-completed", "half/refs/heads/main", "write", "git-directory", true},
		{"envrc", ".envrc", "write", "envrc", false},
		{"vscode-tasks", ".vscode/tasks.json", "patch-create", "vscode-tasks", false},
		{"ordinary", "src/main.c", "write", "", false},
		{"ordinary-new", "build/out.o", "patch-create", "", false},
		{"half-built-other", "half/notes.txt", "write", "", false},
	}
	for _, waived := range []bool{false, true} {
		for _, r := range rows {
			name := r.name
			if waived {
				name += "-waived"
			}
			t.Run(name, func(t *testing.T) {
				root := gitTree(t)
				rt, err := OpenRoot(root)
				must(t, err)
				defer rt.Close()
				if waived {
					rt.SetGuard(guardset.For([]string{spec.GGitPersistence}))
				}
				before, _ := os.ReadFile(filepath.Join(root, r.path))
				guard, err := guardOp(rt, r.op, r.path)
				after, aerr := os.ReadFile(filepath.Join(root, r.path))
				if r.refused && !waived {
					if !errors.Is(err, guardset.ErrProtected) {
						t.Fatalf("%s %s = %v, want %v", r.op, r.path, err, guardset.ErrProtected)
					}
					if ErrorKind(err) != "guard" || !strings.Contains(err.Error(), r.row) {
						t.Errorf("error %q (kind %s) does not name row %s", err, ErrorKind(err), r.row)
					}
					if string(before) != string(after) {
						t.Errorf("%s changed: %q -> %q", r.path, before, after)
					}
					if before == nil && aerr == nil {
						t.Errorf("%s was created", r.path)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s %s = %v, want success", r.op, r.path, err)
				}
				if guard != r.row && r.op != "remove" {
					t.Errorf("reported row %q, want %q", guard, r.row)
				}
			})
		}
	}
}

// guardOp does op on rel beneath rt and returns the row it reported.
func guardOp(rt *Root, op, rel string) (string, error) {
	switch op {
	case "remove": // Remove reports nothing: the row is not checked
		p, err := rt.WritePath(rel)
		if err != nil {
			return "", err
		}
		return "", Remove(p)
	case "write":
		p, err := rt.WritePath(rel)
		if err != nil {
			return "", err
		}
		res, err := Write(p, []byte("[core]\n\tfsmonitor = evil\n"), WriteOptions{})
		return res.Guard, err
	}
	var diff string
	switch op {
	case "patch-create":
		diff = "--- /dev/null\n+++ b/" + rel + "\n@@ -0,0 +1 @@\n+evil\n"
	case "patch-delete":
		b, err := os.ReadFile(filepath.Join(rt.Path(), rel))
		if err != nil {
			return "", err
		}
		diff = "--- a/" + rel + "\n+++ /dev/null\n@@ -1 +0,0 @@\n-" + string(b)
	default:
		diff = "--- a/" + rel + "\n+++ b/" + rel + "\n@@ -1 +1 @@\n-orig\n+evil\n"
	}
	res, err := Patch(rt, []byte(diff), 0)
	if err != nil {
		return "", err
	}
	return res.Files[0].Guard, nil
}

// TestGuardRootInsideGit: a root that is itself a git directory, or lies
// inside one, guards everything beneath it.
func TestGuardRootInsideGit(t *testing.T) {
	root := gitTree(t)
	for _, c := range []struct{ dir, rel string }{
		{".git", "hooks/pre-commit"},
		{".git/hooks", "pre-commit"},
		{"bare.git", "hooks/x"},
	} {
		rt, err := OpenRoot(filepath.Join(root, c.dir))
		must(t, err)
		p, err := rt.WritePath(c.rel)
		must(t, err)
		if _, err := Write(p, []byte("evil"), WriteOptions{}); !errors.Is(err, guardset.ErrProtected) {
			t.Errorf("root %s: write %s = %v, want %v", c.dir, c.rel, err, guardset.ErrProtected)
		}
		rt.Close()
	}
}

// TestGuardGitfileRoot: a root whose .git is a gitfile (a linked worktree)
// guards the directory it names, as Tier 2 does, even when that directory
// is not (yet) a git directory.
func TestGuardGitfileRoot(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "wt")
	must(t, os.MkdirAll(filepath.Join(root, "meta"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, ".git"), []byte("gitdir: meta\n"), 0o644))
	rt, err := OpenRoot(root)
	must(t, err)
	defer rt.Close()
	p, err := rt.WritePath("meta/config")
	must(t, err)
	if _, err := Write(p, []byte("evil"), WriteOptions{}); !errors.Is(err, guardset.ErrProtected) || !strings.Contains(err.Error(), "gitfile-target") {
		t.Errorf("write meta/config = %v, want a gitfile-target refusal", err)
	}
	// Trusted writers (hostop/git) pass.
	p, err = rt.GitWritePath("meta/HEAD")
	must(t, err)
	if _, err := Write(p, []byte("0000000000000000000000000000000000000000\n"), WriteOptions{}); err != nil {
		t.Errorf("trusted write = %v", err)
	}
}

// TestHostGuardProfile: a Host's guard follows its capability's profile:
// the default Tier 1 profile refuses .git/config, one that waives
// no-git-persistence writes it and reports it (in the result and the
// event log), as Tier 2 does.
func TestHostGuardProfile(t *testing.T) {
	e, err := policy.NewEngine()
	must(t, err)
	must(t, e.Register(policy.Profile{Name: "host-waive-git", Tier: policy.TierStructured,
		HostOps: []string{string(policy.OpWriteFile), string(policy.OpApplyPatch)}, Waive: []string{spec.GGitPersistence}}))
	logPath := filepath.Join(t.TempDir(), "events.jsonl")
	for _, c := range []struct {
		profile string
		refused bool
	}{
		{"host", true},
		{"host-waive-git", false},
	} {
		root := gitTree(t)
		cp, err := e.MintHostOp(c.profile, "test", 0)
		must(t, err)
		h, err := NewHost(cp, root)
		must(t, err)
		h.EventLog = logPath
		res, err := h.WriteFile(".git/config", []byte(fsmonitorConfig), WriteOptions{})
		if c.refused {
			if !errors.Is(err, guardset.ErrProtected) {
				t.Errorf("%s: WriteFile(.git/config) = %v, want %v", c.profile, err, guardset.ErrProtected)
			}
		} else if err != nil || res.Guard != "git-config" {
			t.Errorf("%s: WriteFile(.git/config) = %+v, %v; want written and reported as git-config", c.profile, res, err)
		}
		pres, err := h.ApplyPatch([]byte("--- a/.git/HEAD\n+++ b/.git/HEAD\n@@ -1 +1 @@\n-orig\n+evil\n"), 0)
		if c.refused != errors.Is(err, guardset.ErrProtected) || (!c.refused && (err != nil || pres.Files[0].Guard != "git-metadata")) {
			t.Errorf("%s: ApplyPatch(.git/HEAD) = %+v, %v", c.profile, pres, err)
		}
		h.Close()
	}
	evs, err := eventlog.ReadLast(logPath, 10)
	must(t, err)
	var notes []string
	for _, ev := range evs {
		for _, a := range ev.Argv {
			if strings.HasPrefix(a, "guard-reported:") {
				notes = append(notes, a)
			}
		}
	}
	if want := []string{"guard-reported:git-config:.git/config", "guard-reported:git-metadata:.git/HEAD"}; strings.Join(notes, " ") != strings.Join(want, " ") {
		t.Errorf("event log reports %v, want %v", notes, want)
	}
}

const fsmonitorConfig = "[core]\n\tfsmonitor = touch PWNED\n"

// TestHostGuardProfileChanges: a Tier 1 profile's [guard] (rows moved and
// added) decides the Host's writes, through NewHost as every Tier 1 entry
// point (the CLI, the MCP server) makes one: each path with the row it
// falls under and whether the write is refused (and the file unchanged)
// or done and reported.
func TestHostGuardProfileChanges(t *testing.T) {
	e, err := policy.NewEngine()
	must(t, err)
	pf := filepath.Join(t.TempDir(), "host-guard.toml")
	prof := testutil.GuardProfile("host-guard", "tier = 1\nhost_ops = [\"write_file\", \"apply_patch\"]\n", "envrc", "vscode-tasks")
	must(t, os.WriteFile(pf, []byte(prof), 0o600))
	p, err := policy.ResolveProfile(pf)
	must(t, err)
	must(t, e.Register(p))
	for _, c := range []struct {
		path, op, row string
		refused       bool
	}{
		{".envrc", "write", "envrc", true},
		{".vscode/tasks.json", "patch-create", "vscode-tasks", true},
		{".vscode/settings.json", "write", "vscode-settings", false},
		{".git/hooks/pre-commit", "write", "git-hooks", false},
		{".git/hooks/post-merge", "patch-create", "git-hooks", false},
		{".git/config", "write", "git-config", true},
		{"vendor/lib/.git/config", "write", "git-config", true},
		{"Makefile", "patch-create", "makefile", true},
		{"src/Makefile", "write", "makefile", true},
		{"ci/run.sh", "write", "ci", false},
		{"src/ci/run.sh", "write", "", false},
		{"src/main.c", "write", "", false},
	} {
		t.Run(c.path+"-"+c.op, func(t *testing.T) {
			root := gitTree(t)
			must(t, os.WriteFile(filepath.Join(root, "src", "Makefile"), []byte("orig\n"), 0o644))
			cp, err := e.MintHostOp("host-guard", "test", 0)
			must(t, err)
			h, err := NewHost(cp, root)
			must(t, err)
			defer h.Close()
			before, _ := os.ReadFile(filepath.Join(root, c.path))
			guard, err := guardOp(h.Root(), c.op, c.path)
			after, _ := os.ReadFile(filepath.Join(root, c.path))
			if c.refused {
				if !errors.Is(err, guardset.ErrProtected) || !strings.Contains(err.Error(), c.row) {
					t.Fatalf("%s %s = %v, want a refusal naming %s", c.op, c.path, err, c.row)
				}
				if string(before) != string(after) {
					t.Fatalf("%s changed although refused", c.path)
				}
				return
			}
			if err != nil || guard != c.row {
				t.Fatalf("%s %s = %q, %v; want done and reported as %q", c.op, c.path, guard, err, c.row)
			}
		})
	}
}
