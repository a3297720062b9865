//go:build linux

package escape

import (
	"fmt"
	"path/filepath"

	fx "github.com/confine-sandbox/confine/internal/fixture"
)

// gitVectors attack the persistence guard (no-git-persistence, issue 12):
// the work directory is a git work tree, and each row tries to leave
// something git on the host would later run or obey: a hook, a
// configuration or attributes change, a replaced .git, and the same
// through the launcher's own calls (truncate(2) and renames on old ABIs,
// chmod through the metadata supervisor). Every row's control does it
// unconfined. They run under oldABI too, where the supervisor performs
// truncation and renames itself.
func gitVectors() []vcase {
	// repo makes e.wd a work tree: .git with a configuration, a hook
	// sample and attributes, and one source directory.
	repo := func(e *env) (git string) {
		// Made through e.wd so every directory on the way is the user's.
		for _, f := range []string{".git/config", ".git/HEAD", ".git/info/attributes", "src/main.c"} {
			e.file(e.wd, f, 0o644)
		}
		e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
		return filepath.Join(e.wd, ".git")
	}
	sh := func(script string) []string { return []string{"sh", "-c", script} }
	rows := []vcase{
		{name: "git-hook-write", vector: "write-file", setup: func(e *env) fixture {
			hook := filepath.Join(repo(e), "hooks", "pre-commit")
			return fixture{args: []string{hook}, effect: fx.Exists(hook)}
		}},
		{name: "git-rw-root-hook-write", vector: "write-file", setup: func(e *env) fixture {
			// A repository granted with --rw: its .git is guarded too.
			other := e.freshDir("rw-repo-")
			e.file(other, ".git/config", 0o644)
			e.file(other, ".git/hooks/pre-commit.sample", 0o755)
			hook := filepath.Join(other, ".git", "hooks", "pre-commit")
			return fixture{args: []string{hook}, cliArgs: []string{"--rw", other}, effect: fx.Exists(hook)}
		}},
		{name: "git-config-write", vector: "append-file", setup: func(e *env) fixture {
			cfg := filepath.Join(repo(e), "config")
			return fixture{args: []string{cfg}, effect: contentChanged(cfg)}
		}},
		{name: "git-attributes-write", vector: "write-file", setup: func(e *env) fixture {
			attr := filepath.Join(repo(e), "info", "attributes")
			return fixture{args: []string{attr}, effect: contentChanged(attr)}
		}},
		{name: "git-config-truncate", vector: "truncate-file", setup: func(e *env) fixture {
			cfg := filepath.Join(repo(e), "config")
			return fixture{args: []string{cfg}, effect: contentChanged(cfg)}
		}},
		{name: "git-hook-rename-in", vector: "rename-out", setup: func(e *env) fixture {
			hook := filepath.Join(repo(e), "hooks", "pre-commit")
			src := e.file(e.wd, "src/payload", 0o755)
			return fixture{args: []string{src, hook}, effect: fx.Exists(hook)}
		}},
		{name: "git-config-link-then-write", vector: "link-out", setup: func(e *env) fixture {
			// A hard link to .git/config elsewhere in the work tree, then a
			// write through it.
			cfg := filepath.Join(repo(e), "config")
			alias := filepath.Join(e.wd, "src", "cfg")
			return fixture{command: []string{"sh", "-c", `"$0" link-out "$1" "$2" && "$0" append-file "$2"`, probePath, cfg, alias}, effect: contentChanged(cfg)}
		}},
		{name: "git-config-chmod", vector: "chmod", setup: func(e *env) fixture {
			cfg := filepath.Join(repo(e), "config")
			return fixture{args: []string{cfg, "0777"}, effect: func() (bool, string) {
				st, err := statOf(cfg)
				if err != nil {
					return true, err.Error()
				}
				return st.Mode&0o7777 != 0o644, fmt.Sprintf("%s has mode %#o", cfg, st.Mode&0o7777)
			}}
		}},
		{name: "git-dir-replace", vector: "git-dir-replace", setup: func(e *env) fixture {
			// Move .git aside and put a new one with a hook in its place.
			git := repo(e)
			hook := filepath.Join(git, "hooks", "post-checkout")
			return fixture{command: sh(`mv .git .git-away && mkdir -p .git/hooks && echo '#!/bin/sh' > .git/hooks/post-checkout`), effect: fx.Exists(hook)}
		}},
		{name: "git-dir-remove", vector: "git-dir-replace", setup: func(e *env) fixture {
			git := repo(e)
			return fixture{command: sh(`rm -rf .git`), effect: fx.Gone(filepath.Join(git, "config"))}
		}},
	}
	for i := range rows {
		rows[i].setup = waiveOnOldABI(rows[i].setup)
	}
	return rows
}

// waiveOnOldABI is oldABI for rows that may run a shell instead of the
// probe: those cannot report, so only probe rows must.
func waiveOnOldABI(setup func(e *env) fixture) func(e *env) fixture {
	withWaiver := oldABI(setup)
	return func(e *env) fixture {
		f := withWaiver(e)
		f.mustReport = f.mustReport && f.command == nil
		return f
	}
}
