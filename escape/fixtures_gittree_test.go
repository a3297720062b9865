//go:build linux

package escape

import (
	"path/filepath"

	fx "github.com/confine-sandbox/confine/internal/fixture"
)

// gitTreeVectors attack the persistence guard through the calls the
// supervisor performs for the command (issue 22): moving or removing
// .git itself, and, under the core, where the supervisor now performs
// writes, removals and links on entries made during the run, reaching
// .git through such an entry (a symlink or a hard link in a new
// top-level directory, an open for writing without O_CREAT). Each row
// runs under the default backend (landlock+namespaces where it works),
// again as "-core" with --backend core, and under bubblewrap in
// TestEscapeBwrap. Every control does it unconfined.
func gitTreeVectors() []vcase {
	repo := func(e *env) (git string) {
		for _, f := range []string{".git/config", ".git/HEAD", "src/main.c"} {
			e.file(e.wd, f, 0o644)
		}
		e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
		return filepath.Join(e.wd, ".git")
	}
	sh := func(script string, args ...string) []string {
		return append([]string{"sh", "-c", script, probePath}, args...)
	}
	rows := []vcase{
		{name: "git-dir-rename-away", vector: "rename-out", setup: func(e *env) fixture {
			git := repo(e)
			return fixture{args: []string{git, filepath.Join(e.wd, "g")}, effect: fx.Gone(filepath.Join(git, "config"))}
		}},
		{name: "git-dir-rename-into-subdir", vector: "rename-out", setup: func(e *env) fixture {
			// The issue's `mv .git src/g`: a rename across directories.
			git := repo(e)
			return fixture{args: []string{git, filepath.Join(e.wd, "src", "g")}, effect: fx.Gone(filepath.Join(git, "config"))}
		}},
		{name: "git-hooks-rename-away", vector: "rename-out", setup: func(e *env) fixture {
			git := repo(e)
			return fixture{args: []string{filepath.Join(git, "hooks"), filepath.Join(e.wd, "hooks")}, effect: fx.Gone(filepath.Join(git, "hooks"))}
		}},
		{name: "git-head-unlink", vector: "git-unlink", setup: func(e *env) fixture {
			git := repo(e)
			head := filepath.Join(git, "HEAD")
			return fixture{command: sh(`rm -f "$1"`, head), effect: fx.Gone(head)}
		}},
		{name: "git-config-via-new-dir-symlink", vector: "append-file", setup: func(e *env) fixture {
			// A new top-level directory (which the supervisor writes in
			// under the core) holding a symlink to .git/config.
			cfg := filepath.Join(repo(e), "config")
			return fixture{command: sh(`mkdir build && ln -s ../.git/config build/c && "$0" append-file build/c`), effect: contentChanged(cfg)}
		}},
		{name: "git-config-link-into-new-dir", vector: "link-out", setup: func(e *env) fixture {
			cfg := filepath.Join(repo(e), "config")
			return fixture{command: sh(`mkdir build && "$0" link-out "$1" build/c && "$0" append-file build/c`, cfg), effect: contentChanged(cfg)}
		}},
		{name: "git-hook-write-through-new-dir", vector: "write-file", setup: func(e *env) fixture {
			git := repo(e)
			hook := filepath.Join(git, "hooks", "pre-commit")
			return fixture{command: sh(`mkdir build && cd build && "$0" write-file ../.git/hooks/pre-commit`), effect: fx.Exists(hook)}
		}},
		{name: "git-config-truncate-open", vector: "open-trunc", setup: func(e *env) fixture {
			// open(O_RDONLY|O_TRUNC) without O_CREAT: sent to the
			// supervisor under the core.
			cfg := filepath.Join(repo(e), "config")
			return fixture{args: []string{cfg, "rdonly"}, effect: contentChanged(cfg)}
		}},
	}
	// Repositories below the top level (issue 22 item 3): a vendored
	// one, an embedded submodule, an absorbed submodule whose gitfile is
	// rewritten in place (an open without O_CREAT) and its git directory
	// under .git/modules.
	nested := func(e *env) (vendored, embedded, gitfile, modules string) {
		repo(e)
		vendored = filepath.Join(e.wd, "vendor", "lib", ".git")
		embedded = filepath.Join(e.wd, "ext", "sub", ".git")
		for _, d := range []string{vendored, embedded} {
			for _, f := range []string{"config", "HEAD", "hooks/pre-commit.sample"} {
				e.file(e.wd, filepath.Join(d[len(e.wd)+1:], f), 0o644)
			}
		}
		e.file(e.wd, ".gitmodules", 0o644)
		modules = filepath.Join(e.wd, ".git", "modules", "abs")
		e.file(e.wd, ".git/modules/abs/config", 0o644)
		e.file(e.wd, ".git/modules/abs/HEAD", 0o644)
		gitfile = e.file(e.wd, "abs/.git", 0o644)
		return
	}
	rows = append(rows,
		vcase{name: "git-vendored-config-write", vector: "append-file", setup: func(e *env) fixture {
			v, _, _, _ := nested(e)
			cfg := filepath.Join(v, "config")
			return fixture{args: []string{cfg}, effect: contentChanged(cfg)}
		}},
		vcase{name: "git-vendored-hook-write", vector: "write-file", setup: func(e *env) fixture {
			v, _, _, _ := nested(e)
			hook := filepath.Join(v, "hooks", "pre-commit")
			return fixture{args: []string{hook}, effect: fx.Exists(hook)}
		}},
		vcase{name: "git-embedded-submodule-hook-write", vector: "write-file", setup: func(e *env) fixture {
			_, m, _, _ := nested(e)
			hook := filepath.Join(m, "hooks", "post-checkout")
			return fixture{args: []string{hook}, effect: fx.Exists(hook)}
		}},
		vcase{name: "git-absorbed-gitfile-rewrite", vector: "append-file", setup: func(e *env) fixture {
			// O_WRONLY|O_APPEND without O_CREAT: the new-name refusal
			// never sees it.
			_, _, g, _ := nested(e)
			return fixture{args: []string{g}, effect: contentChanged(g)}
		}},
		vcase{name: "git-absorbed-modules-config-write", vector: "append-file", setup: func(e *env) fixture {
			_, _, _, m := nested(e)
			cfg := filepath.Join(m, "config")
			return fixture{args: []string{cfg}, effect: contentChanged(cfg)}
		}},
		vcase{name: "git-nested-repo-move", vector: "rename-out", setup: func(e *env) fixture {
			// A directory holding a .git moved into another place (a
			// submodule's path, say).
			if e.confined && e.backend == "bwrap" {
				e.t.Skip("bubblewrap has no supervisor to refuse moving a directory that holds a repository (its .git stays read-only where it goes; ledger: no-git-persistence)")
			}
			v, _, _, _ := nested(e)
			lib := filepath.Dir(v)
			return fixture{args: []string{lib, filepath.Join(e.wd, "ext", "moved")}, effect: fx.Gone(filepath.Join(v, "config"))}
		}},
		vcase{name: "git-nested-repo-move-samedir", vector: "rename-out", setup: func(e *env) fixture {
			// A directory holding a .git renamed within its own
			// directory (into a submodule's path beside it, say):
			// Landlock ABI 1 allows that rename on its own, so the
			// supervisor must see it too.
			if e.confined && e.backend == "bwrap" {
				e.t.Skip("bubblewrap has no supervisor to refuse moving a directory that holds a repository (its .git stays read-only where it goes; ledger: no-git-persistence)")
			}
			v, _, _, _ := nested(e)
			lib := filepath.Dir(v)
			return fixture{args: []string{lib, filepath.Join(filepath.Dir(lib), "sub")}, effect: fx.Gone(filepath.Join(v, "config"))}
		}},
	)
	all := make([]vcase, 0, 2*len(rows))
	for _, r := range rows {
		c := r
		c.name += "-core"
		setup := r.setup
		c.setup = waiveOnOldABI(func(e *env) fixture {
			f := setup(e)
			if e.confined && e.backend == "" {
				f.cliArgs = append(f.cliArgs, "--backend", "core")
			}
			return f
		})
		r.setup = waiveOnOldABI(r.setup)
		all = append(all, r, c)
	}
	return all
}
