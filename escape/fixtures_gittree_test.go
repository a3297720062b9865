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
		r.setup = waiveOnOldABI(setup)
		all = append(all, r, c)
	}
	return all
}
