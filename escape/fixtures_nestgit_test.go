//go:build linux

package escape

import (
	"path/filepath"

	fx "github.com/confine-sandbox/confine/internal/fixture"
)

// nestGitVectors attack the persistence guard's refusal of a new .git
// below the work tree's top level (no-git-persistence, issue 12): a nested
// repository directory, a prepared one renamed into place, a symlink and a
// gitfile named .git, and a second thread flipping a name to .git while
// the first creates it. Each control plants the .git unconfined.
//
// Only the core's supervisor refuses these (the ledger says so), so the
// confined runs ask for --backend core; the bubblewrap pass skips them,
// saying why.
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
	core := func(setup func(e *env) fixture) func(e *env) fixture {
		return func(e *env) fixture {
			if e.confined && e.backend == "bwrap" {
				e.t.Skip("a new .git below the top level is refused by the core's supervisor only; under bubblewrap it is reported, not refused (ledger: no-git-persistence)")
			}
			f := setup(e)
			if e.confined {
				f.cliArgs = append(f.cliArgs, "--backend", "core")
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
		{name: "git-nested-race", vector: "name-race", setup: func(e *env) fixture {
			src := repo(e)
			return fixture{args: []string{src}, effect: fx.Exists(filepath.Join(src, ".git"))}
		}},
	}
	for i := range rows {
		rows[i].setup = waiveOnOldABI(core(rows[i].setup))
	}
	return rows
}
