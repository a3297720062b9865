//go:build linux

package escape

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// nestGitVectors attack the persistence guard's refusal of a new .git
// below the work tree's top level (no-git-persistence, issue 12): a nested
// repository directory, a prepared one renamed into place, a symlink and a
// gitfile named .git, and a second thread flipping a name to .git while
// the first creates it. Each control plants the .git unconfined.
//
// The supervisor refuses them under the core and, resolving in the
// command's own tree, under landlock+namespaces on every Landlock ABI
// (the ledger says so): each row runs with --backend namespaces (skipped,
// saying why, where that backend or the refusal is unavailable) and again
// as "-core" with --backend core. Bubblewrap only reports them, so the
// bubblewrap pass skips them, saying why.
func nestGitVectors() []vcase {
	// repo makes e.wd a git work tree with a source directory, whose
	// sub holds the new repository (made through e.wd: every directory
	// on the way is the user's).
	repo := func(e *env) (sub string) {
		for _, f := range []string{".git/config", ".git/HEAD", "src/main.c"} {
			e.file(e.wd, f, 0o644)
		}
		return filepath.Join(e.wd, "src")
	}
	guarded := func(setup func(e *env) fixture, core bool) func(e *env) fixture {
		return func(e *env) fixture {
			if e.confined && e.backend == "bwrap" {
				e.t.Skip("a new .git below the top level is refused by the supervisor of landlock+namespaces and the core only; under bubblewrap it is reported, not refused (ledger: no-git-persistence)")
			}
			if e.confined && !core && e.backend == "" {
				requireNamespaces(e)
			}
			f := setup(e)
			if e.confined && e.backend == "" {
				b := "namespaces"
				if core {
					b = "core"
				}
				f.cliArgs = append(f.cliArgs, "--backend", b)
			}
			return f
		}
	}
	rows := []vcase{
		{name: "git-nested-mkdir", vector: "mkdir", setup: func(e *env) fixture {
			git := filepath.Join(repo(e), ".git")
			return fixture{args: []string{git}, effect: fx.Exists(git)}
		}},
		{name: "git-nested-mkdir-case", vector: "mkdir", setup: func(e *env) fixture {
			git := filepath.Join(repo(e), ".Git")
			return fixture{args: []string{git}, effect: fx.Exists(git)}
		}},
		{name: "git-nested-rename", vector: "rename-out", setup: func(e *env) fixture {
			// A repository prepared under another name, then renamed
			// into place.
			src := repo(e)
			e.file(src, "evil/HEAD", 0o644)
			e.file(src, "evil/config", 0o644)
			git := filepath.Join(src, ".git")
			return fixture{args: []string{filepath.Join(src, "evil"), git}, effect: fx.Exists(git)}
		}},
		{name: "git-nested-symlink", vector: "symlink", setup: func(e *env) fixture {
			src := repo(e)
			e.file(src, "evil/HEAD", 0o644)
			git := filepath.Join(src, ".git")
			return fixture{args: []string{"evil", git}, effect: fx.Exists(git)}
		}},
		{name: "git-nested-gitfile", vector: "gitfile", setup: func(e *env) fixture {
			src := repo(e)
			for _, f := range []string{"evil/HEAD", "evil/config", "evil/objects/.keep", "evil/refs/heads/.keep"} {
				e.file(src, f, 0o644)
			}
			git := filepath.Join(src, ".git")
			return fixture{args: []string{git, "evil"}, effect: fx.Exists(git)}
		}},
		// The supervisor performs the command's creations: it must
		// resolve their paths in the command's tree, where .git is a
		// read-only mount, never in its own, where .git is writable.
		// Through an absolute symlink, a dangling one, and "..".
		{name: "git-hook-abs-symlink", vector: "write-file", setup: func(e *env) fixture {
			hooks := filepath.Join(e.wd, ".git", "hooks")
			repo(e)
			e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
			hook := filepath.Join(hooks, "pre-commit")
			return fixture{command: []string{"sh", "-c", `ln -s "$1" src/hk && "$0" write-file src/hk/pre-commit`, probePath, hooks}, effect: fx.Exists(hook)}
		}},
		{name: "git-hook-dangling-symlink", vector: "write-file", setup: func(e *env) fixture {
			repo(e)
			e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
			hook := filepath.Join(e.wd, ".git", "hooks", "pre-commit")
			return fixture{command: []string{"sh", "-c", `ln -s "$1" src/hk && "$0" write-file src/hk`, probePath, hook}, effect: fx.Exists(hook)}
		}},
		{name: "git-hook-dotdot", vector: "write-file", setup: func(e *env) fixture {
			repo(e)
			e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
			hook := filepath.Join(e.wd, ".git", "hooks", "pre-commit")
			return fixture{command: []string{"sh", "-c", `cd src && "$0" write-file ../.git/hooks/pre-commit`, probePath}, effect: fx.Exists(hook)}
		}},
		{name: "git-nested-race", vector: "name-race", setup: func(e *env) fixture {
			src := repo(e)
			return fixture{args: []string{src}, effect: fx.Exists(filepath.Join(src, ".git"))}
		}},
	}
	all := make([]vcase, 0, 2*len(rows))
	for _, r := range rows {
		c := r
		c.name += "-core"
		c.setup = waiveOnOldABI(guarded(r.setup, true))
		r.setup = waiveOnOldABI(guarded(r.setup, false))
		all = append(all, r, c)
	}
	return all
}

// nsRefusal caches, per uid, what confine check says of the namespaces
// backend (nsHost).
var nsRefusal sync.Map

// requireNamespaces skips a row of the landlock+namespaces refusal where
// that backend does not work for the user. Every Landlock ABI counts: on
// ABI 1 the supervisor emulates renames across directories and refuses
// a new .git all the same (ledger: no-git-persistence).
func requireNamespaces(e *env) {
	requireNamespacesABI(e, 1, "landlock+namespaces needs Landlock")
}

// nsHost is what requireNamespacesABI learns from confine check, per uid.
type nsHost struct {
	noUserNS string // why user namespaces do not work, "" where they do
	abi      int
}

// requireNamespacesABI skips e's test where landlock+namespaces cannot
// run, or runs below Landlock ABI min (then saying what, why).
func requireNamespacesABI(e *env, min int, what string) {
	h, ok := nsRefusal.Load(e.user.UID)
	if !ok {
		c := testutil.CLI{Bin: testutil.SelfBinary(e.t), UID: e.user.UID, Dir: e.wd, Args: []string{"check", "--json"}}
		o := execute(e.t, c.Command())
		var ck checkReport
		var abi struct {
			Host struct {
				ABI int `json:"landlock_abi"`
			} `json:"host"`
		}
		err := json.Unmarshal([]byte(o.stdout), &ck)
		if err == nil {
			err = json.Unmarshal([]byte(o.stdout), &abi)
		}
		if err != nil {
			e.t.Fatalf("check --json (exit %d): %v\n%s\n%s", o.code, err, o.stdout, o.stderr)
		}
		nh := nsHost{abi: abi.Host.ABI}
		if !ck.Host.UserNS {
			nh.noUserNS = "user namespaces do not work here (" + ck.Host.UserNSErr + ")"
		}
		nsRefusal.Store(e.user.UID, nh)
		h = nh
	}
	why := h.(nsHost).noUserNS
	if why == "" && h.(nsHost).abi < min {
		why = fmt.Sprintf("Landlock ABI below %d: %s", min, what)
	}
	if why != "" {
		e.t.Skipf("not applicable as %s: %s; the -core row covers the core", e.user.Name, why)
	}
}
