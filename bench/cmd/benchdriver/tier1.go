//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// tier1 times the Tier 1 file operations against the programs they
// replace, on a tree of TIER1_FILES small source files: `confine fs search`
// against `grep -r`, and `confine fs read` of one file against `cat`. The
// "bare" column is grep or cat, the "confine" column the Tier 1 command;
// both are whole process launches, interleaved in random order per round.
// bwrap has no counterpart.
func (b *bench) tier1() error {
	n := b.knobInt("TIER1_FILES", 10000)
	reps := b.knobInt("TIER1_REPS", 15)
	tree := filepath.Join(b.tmp, "tier1-tree")
	if err := makeTree(tree, n); err != nil {
		return err
	}
	defer os.RemoveAll(tree)
	one := filepath.Join("d0", "f0.go")
	cases := []struct {
		id, name string
		bare     []string
		conf     []string
		target   string
	}{
		{"tier1_search", fmt.Sprintf("Tier 1 search: %d files, one rare match (grep -r vs confine fs search)", n),
			[]string{"grep", "-r", "needle-4242", "."},
			[]string{b.confineBin, "fs", "search", "needle-4242", "--event-log", "off"}, "≤ 1.00x"},
		{"tier1_search_many", fmt.Sprintf("Tier 1 search: %d files, one match in each", n),
			[]string{"grep", "-r", "func Foo17(", "."},
			[]string{b.confineBin, "fs", "search", "func Foo17\\(", "--max-matches", "1000000", "--event-log", "off"}, "≤ 1.00x"},
		{"tier1_read", "Tier 1 read of one file in the tree (cat vs confine fs read)",
			[]string{"cat", one},
			[]string{b.confineBin, "fs", "read", one, "--event-log", "off"}, "≤ 1.00x"},
	}
	// The guard's cost differs by backend: a read-only bind with
	// namespaces, one Landlock rule per top-level entry under the core.
	for _, backend := range []string{"", "core"} {
		if err := b.persistRow(tree, reps, backend); err != nil {
			return err
		}
	}
	for _, c := range cases {
		s := map[box][]float64{}
		for i := 0; i < reps; i++ {
			order := []box{bare, confine}
			if i%2 == 1 {
				order = []box{confine, bare}
			}
			for _, x := range order {
				argv := c.bare
				if x == confine {
					argv = c.conf
				}
				d, err := timeRun(tree, argv)
				if err != nil {
					return fmt.Errorf("%s: %s: %w", c.id, strings.Join(argv, " "), err)
				}
				s[x] = append(s[x], ms(d))
			}
		}
		r := newRow(c.id, c.name, "ms", 2)
		r.hide[bwrap] = true
		r.Text[bwrap] = "n/a"
		b.fill(r, s)
		r.Target = c.target
		r.Met = verdict(r.Ratio[confine] <= 1.0)
		flagNoise(r, 1.0, false)
		r.Notes = fmt.Sprintf("wall time of the whole process, %d interleaved rounds; runs (ms): %s", reps, sampleText(r, 2))
		b.add(r)
	}
	return nil
}

// makeTree writes n Go-like files of 40 lines in directories of 100.
func makeTree(dir string, n int) error {
	for i := 0; i < n; i++ {
		d := filepath.Join(dir, fmt.Sprintf("d%d", i/100))
		if i%100 == 0 {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return err
			}
		}
		var sb strings.Builder
		for l := 0; l < 40; l++ {
			fmt.Fprintf(&sb, "line %d of file %d: func Foo%d() { return }\n", l, i, l)
		}
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("f%d.go", i%100)), []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func timeRun(dir string, argv []string) (time.Duration, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = nil, nil
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if ee, ok := err.(*exec.ExitError); ok {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.ExitStatus() == 1 {
			return d, nil // grep and confine fs search: no match
		}
	}
	return d, err
}

// persistRow times `confine run -- /bin/true` with the tree as the work
// directory, without and with a .git (config and the sample hooks): the
// difference is what the persistence guard (keeping .git read-only) and
// the persistence report's snapshots cost where they have the most to look
// at. "bare" is the run without .git here. backend: --backend ("": the
// default).
func (b *bench) persistRow(tree string, reps int, backend string) error {
	git := filepath.Join(tree, ".git")
	defer os.RemoveAll(git)
	argv := []string{b.confineBin, "run", "--workdir", tree, "--event-log", "off", "--", "/bin/true"}
	name, what := "persist_launch", "default backend"
	if backend != "" {
		argv = append(argv[:2], append([]string{"--backend", backend}, argv[2:]...)...)
		name, what = "persist_launch_"+backend, "--backend "+backend
	}
	s := map[box][]float64{}
	for i := 0; i < reps; i++ {
		for _, x := range []box{bare, confine} {
			if err := os.RemoveAll(git); err != nil {
				return err
			}
			if x == confine {
				if err := os.MkdirAll(filepath.Join(git, "hooks"), 0o755); err != nil {
					return err
				}
				for _, h := range []string{"config", "hooks/pre-commit.sample", "hooks/pre-push.sample", "hooks/commit-msg.sample", "hooks/update.sample"} {
					if err := os.WriteFile(filepath.Join(git, h), []byte("x\n"), 0o644); err != nil {
						return err
					}
				}
			}
			d, err := timeRun(tree, argv)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			s[x] = append(s[x], ms(d))
		}
	}
	r := newRow(name, "launch /bin/true in a 10,000-file work tree, "+what+": without .git (bare column) / with .git, guarded (confine column)", "ms", 2)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a"
	b.fill(r, s)
	diff := r.Values[confine] - r.Values[bare]
	r.Target = "with .git ≤ without + 1 ms"
	r.Met = verdict(diff <= 1)
	// Rounds are interleaved: the per-round differences cancel drift
	// common to a round. The verdict stands when they all agree.
	var lo, hi float64
	for i := range s[bare] {
		d := s[confine][i] - s[bare][i]
		if i == 0 || d < lo {
			lo = d
		}
		if i == 0 || d > hi {
			hi = d
		}
	}
	if lo <= 1 && hi > 1 {
		r.Met = fmt.Sprintf("inconclusive (per-round differences %.2f..%.2f ms; as measured: %s)", lo, hi, r.Met)
	}
	r.Notes = fmt.Sprintf("difference of medians %.2f ms; both runs take the persistence snapshots (internal/persist); with .git the guard keeps it read-only and the snapshots have its watched paths too; runs (ms): %s", diff, sampleText(r, 2))
	b.add(r)
	return nil
}
