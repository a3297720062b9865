//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// filesGit is the files payload under --backend core (files_git) and
// --backend namespaces (files_git_ns) in a work tree without .git ("bare"
// column) and with one ("confine" column): the persistence guard then
// sends every name the payload creates to the supervisor, which refuses a
// new .git and performs the rest itself (internal/notify, create.go; with
// namespaces always on its Landlock-confined thread, resolving in the
// command's tree). Both runs are confine runs, interleaved; the row's
// ratio is the guard's cost on file creation.
func (b *bench) filesGit(n, reps, size int) error {
	if err := b.filesGitOn("core", "files_git", n, reps, size); err != nil {
		return err
	}
	return b.filesGitOn("namespaces", "files_git_ns", n, reps, size)
}

func (b *bench) filesGitOn(backend, id string, n, reps, size int) error {
	tree := filepath.Join(b.wd, "files-git")
	git := filepath.Join(tree, ".git")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	s := map[box][]float64{}
	phases := map[string]map[box][]float64{"create_write_ms": {}, "rename_ms": {}, "delete_ms": {}}
	for i := 0; i < reps; i++ {
		for _, x := range []box{bare, confine} {
			if err := os.RemoveAll(git); err != nil {
				return err
			}
			if x == confine {
				if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(git, "HEAD"), []byte("ref: refs/heads/main\n"), 0o644); err != nil {
					return err
				}
			}
			// A new top-level entry: under the core the supervisor
			// performs every call in it (notify's guardtree.go).
			dir := filepath.Join(tree, fmt.Sprintf("%s-%d", x, i))
			// The later --workdir wins over the bench's own.
			m, err := b.payloadJSON(confine, opts{confine: []string{"--backend", backend, "--workdir", tree, "--ro", filepath.Dir(b.payload)}}, "files", strconv.Itoa(n), dir, strconv.Itoa(size))
			os.RemoveAll(dir)
			if err != nil {
				return fmt.Errorf("%s (%s): %w", id, map[box]string{bare: "without .git", confine: "with .git"}[x], err)
			}
			s[x] = append(s[x], m["total_ms"])
			for k := range phases {
				phases[k][x] = append(phases[k][x], m[k])
			}
		}
	}
	r := newRow(id, fmt.Sprintf("files (%d × %d B), --backend %s: work tree without .git (bare column) / with .git, guarded (confine column)", n, size, backend), "ms", 0)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a"
	b.fill(r, s)
	r.Target = "reported (the guard's refusal of a new .git is on by default)"
	r.Met = "n/a"
	more := func(k string) float64 {
		return 1000 * (median(phases[k][confine]) - median(phases[k][bare])) / float64(n)
	}
	r.Notes = fmt.Sprintf("in a new top-level directory; per file created: %.0f us more; per rename: %.0f us more; per unlink: %.0f us more (phase medians); runs (ms): %s",
		more("create_write_ms"), more("rename_ms"), more("delete_ms"), sampleText(r, 0))
	b.add(r)
	return nil
}
