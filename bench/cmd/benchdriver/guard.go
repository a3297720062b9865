//go:build linux

package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// guard measures the persistence guard's cost (issue 22) under --backend
// core, where it costs most (the supervisor performs every path-changing
// call in an entry made during the run): each workload runs in a work
// tree without .git (the "bare" column) and in the same tree with one
// (the "confine" column, guarded), both confine runs, in interleaved
// rounds whose order alternates, so the ratio is the guard's alone:
//
//   - guard_trapped: benchpayload trapped, the added wall time per trapped
//     call (rename, open for writing, unlink/create, mkdir/rmdir, each on
//     existing names in a new top-level directory);
//   - guard_files: the files payload (GUARD_FILES_N files);
//   - guard_npm: npm install --offline of local tarball dependencies;
//   - guard_pip: python3 -m venv .venv and pip install of a local wheel;
//   - guard_gobuild: go build -o ./app with a fresh GOCACHE in the tree.
//
// What a run made is removed between runs, outside confine.
//
// GUARD_ROWS (comma-separated: trapped, files, npm, pip, gobuild; default
// all) runs only some of them.
func (b *bench) guard() error {
	reps := b.knobInt("GUARD_REPS", 3)
	steps := []struct {
		name string
		f    func(int) error
	}{{"trapped", b.guardTrapped}, {"files", b.guardFiles}, {"npm", b.guardNpm}, {"pip", b.guardPip}, {"gobuild", b.guardGoBuild}}
	want := map[string]bool{}
	for _, s := range strings.Split(b.knob("GUARD_ROWS", "trapped,files,npm,pip,gobuild"), ",") {
		want[strings.TrimSpace(s)] = true
	}
	for _, s := range steps {
		if !want[s.name] {
			continue
		}
		if err := s.f(reps); err != nil {
			return err
		}
	}
	return nil
}

// guardTree makes (or empties of what runs made) the work tree dir with
// files, and gives it a .git when git is set.
func guardTree(dir string, git bool, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if _, keep := files[e.Name()]; !keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			return err
		}
	}
	if !git {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, ".git", "hooks"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, ".git", "HEAD"), []byte("ref: refs/heads/main\n"), 0o644)
}

// guardPairs runs f reps times without and with .git in dir, the order
// alternating round by round, and returns the samples per box (bare:
// without .git).
func (b *bench) guardPairs(reps int, dir string, files map[string][]byte, f func(x box) (float64, error)) (map[box][]float64, error) {
	s := map[box][]float64{}
	for i := 0; i < reps; i++ {
		order := []box{bare, confine}
		if i%2 == 1 {
			order = []box{confine, bare}
		}
		for _, x := range order {
			if err := guardTree(dir, x == confine, files); err != nil {
				return nil, err
			}
			v, err := f(x)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", map[box]string{bare: "without .git", confine: "with .git"}[x], err)
			}
			s[x] = append(s[x], v)
		}
	}
	return s, os.RemoveAll(dir)
}

// guardRow adds a ratio row with a target (the ratio at most t).
func (b *bench) guardRow(id, name string, s map[box][]float64, t float64, notes string) {
	r := newRow(id, name, "ms", 0)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a"
	b.fill(r, s)
	r.Target = fmt.Sprintf("guarded/unguarded <= %.2f", t)
	r.Met = verdict(r.Ratio[confine] <= t)
	flagNoise(r, t, false)
	r.Notes = notes + "; runs (ms): " + sampleText(r, 0)
	b.add(r)
}

// timedConfine runs argv under confine --backend core in the work tree dir
// and returns its wall time in ms.
func (b *bench) timedConfine(dir string, o opts, argv ...string) (float64, error) {
	o.confine = append([]string{"--backend", "core", "--workdir", dir, "--ro", filepath.Dir(b.payload)}, o.confine...)
	c := b.command(confine, o, argv...)
	c.Dir = dir
	t0 := time.Now()
	_, err := runOut(c)
	return ms(time.Since(t0)), err
}

func (b *bench) guardTrapped(reps int) error {
	n := b.knobInt("GUARD_TRAPPED_N", 5000)
	// On a tmpfs where there is one: the supervisor's part does not
	// depend on the file system, and ext4 without a journal makes
	// creations slower the more inodes were freed in the last seconds
	// (recently_deleted), which drowns it.
	base, fs := b.wd, "the workdir's file system"
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "confine-bench-guard.")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		if err := os.Chmod(d, 0o755); err != nil {
			return err
		}
		base, fs = d, "/dev/shm (tmpfs)"
	}
	dir := filepath.Join(base, "guard-trapped")
	kinds := []string{"rename_ns", "open_write_ns", "unlink_create_ns", "mkdir_rmdir_ns"}
	per := map[string]map[box][]float64{}
	s, err := b.guardPairs(reps, dir, nil, func(x box) (float64, error) {
		m, err := b.payloadJSON(confine, opts{confine: []string{"--backend", "core", "--workdir", dir, "--ro", filepath.Dir(b.payload)}},
			"trapped", strconv.Itoa(n), filepath.Join(dir, "new"))
		if err != nil {
			return 0, err
		}
		for _, k := range kinds {
			if per[k] == nil {
				per[k] = map[box][]float64{}
			}
			per[k][x] = append(per[k][x], m[k]/1000)
		}
		return m["trapped_ns"] / 1000, nil
	})
	if err != nil {
		return fmt.Errorf("guard_trapped: %w", err)
	}
	r := newRow("guard_trapped", fmt.Sprintf("a trapped call (mean of 4 kinds, %d each, on %s), --backend core: work tree without .git (bare column) / with .git, guarded (confine column)", n, fs), "us", 1)
	r.hide[bwrap] = true
	r.Text[bwrap] = "n/a"
	b.fill(r, s)
	// The added time per call, round by round (pairs of one round).
	var added []float64
	for i := range s[bare] {
		added = append(added, s[confine][i]-s[bare][i])
	}
	add := median(added)
	r.Extra = addExtra(r.Extra, "added_us_per_round", added)
	r.Target = "at most 25 us added per trapped call"
	r.Met = verdict(add <= 25)
	if lo, hi := quantile(added, 0), quantile(added, 1); (lo <= 25) != (hi <= 25) {
		r.Met = fmt.Sprintf("inconclusive (per-round %.1f..%.1f us; as measured: %s)", lo, hi, r.Met)
	}
	var kt []string
	for _, k := range kinds {
		kt = append(kt, fmt.Sprintf("%s +%.1f us", strings.TrimSuffix(k, "_ns"), median(per[k][confine])-median(per[k][bare])))
	}
	r.Notes = fmt.Sprintf("added per trapped call: %.1f us (median of the rounds' differences); per kind (medians): %s; runs (us): %s",
		add, strings.Join(kt, ", "), sampleText(r, 1))
	b.add(r)
	return nil
}

func (b *bench) guardFiles(reps int) error {
	n := b.knobInt("GUARD_FILES_N", 20000)
	dir := filepath.Join(b.wd, "guard-files")
	s, err := b.guardPairs(reps, dir, nil, func(box) (float64, error) {
		m, err := b.payloadJSON(confine, opts{confine: []string{"--backend", "core", "--workdir", dir, "--ro", filepath.Dir(b.payload)}},
			"files", strconv.Itoa(n), filepath.Join(dir, "new"), "512")
		if err != nil {
			return 0, err
		}
		return m["total_ms"], nil
	})
	if err != nil {
		return fmt.Errorf("guard_files: %w", err)
	}
	b.guardRow("guard_files", fmt.Sprintf("files (%d × 512 B: create+write, read, rename, delete) in a new top-level directory, --backend core, without / with .git", n),
		s, 1.3, "the payload's own timing")
	return nil
}

// npmTarball is an npm package tarball (package/...) named name with
// files small modules.
func npmTarball(name string, files int) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	add := func(p, body string) error {
		if err := tw.WriteHeader(&tar.Header{Name: "package/" + p, Mode: 0o644, Size: int64(len(body)), ModTime: time.Unix(1e9, 0)}); err != nil {
			return err
		}
		_, err := tw.Write([]byte(body))
		return err
	}
	if err := add("package.json", fmt.Sprintf(`{"name":%q,"version":"1.0.0","main":"index.js"}`, name)); err != nil {
		return nil, err
	}
	var idx strings.Builder
	for i := 0; i < files; i++ {
		if err := add(fmt.Sprintf("lib/m%d.js", i), fmt.Sprintf("module.exports = %d;\n", i)); err != nil {
			return nil, err
		}
		fmt.Fprintf(&idx, "exports.m%d = require('./lib/m%d.js');\n", i, i)
	}
	if err := add("index.js", idx.String()); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (b *bench) guardNpm(reps int) error {
	if _, err := exec.LookPath("npm"); err != nil {
		b.add(&Row{ID: "guard_npm", Name: "npm install (local tarballs)", Met: "n/a", Notes: "skipped: npm is not installed"})
		return nil
	}
	const deps, per = 5, 200
	files := map[string][]byte{}
	var dl []string
	for i := 0; i < deps; i++ {
		name := fmt.Sprintf("dep%d", i)
		tgz, err := npmTarball(name, per)
		if err != nil {
			return err
		}
		files[name+"-1.0.0.tgz"] = tgz
		dl = append(dl, fmt.Sprintf("%q:%q", name, "file:"+name+"-1.0.0.tgz"))
	}
	files["package.json"] = []byte(`{"name":"app","version":"1.0.0","dependencies":{` + strings.Join(dl, ",") + `}}`)
	dir := filepath.Join(b.wd, "guard-npm")
	s, err := b.guardPairs(reps, dir, files, func(box) (float64, error) {
		return b.timedConfine(dir, opts{path: "/usr/local/bin:/usr/bin:/bin", env: []string{"npm_config_cache=" + filepath.Join(dir, ".npm-cache")}},
			"npm", "install", "--offline", "--no-audit", "--no-fund", "--no-package-lock")
	})
	if err != nil {
		return fmt.Errorf("guard_npm: %w", err)
	}
	b.guardRow("guard_npm", fmt.Sprintf("npm install --offline of %d local tarball dependencies (%d files each), --backend core, without / with .git", deps, per),
		s, 1.10, "wall time of confine run, launch included")
	return nil
}

// benchWheel is a pure-Python wheel of one package with modules files.
func benchWheel(modules int) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	add := func(name, body string) error {
		w, err := zw.Create(name)
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte(body)); err != nil {
			return err
		}
		sum := sha256.Sum256([]byte(body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", name, base64.RawURLEncoding.EncodeToString(sum[:]), len(body))
		return nil
	}
	if err := add("bench_pkg/__init__.py", "VALUE = 42\n"); err != nil {
		return nil, err
	}
	for i := 0; i < modules; i++ {
		if err := add(fmt.Sprintf("bench_pkg/m%d.py", i), fmt.Sprintf("V = %d\n", i)); err != nil {
			return nil, err
		}
	}
	for name, body := range map[string]string{
		"bench_pkg-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: bench-pkg\nVersion: 1.0\n",
		"bench_pkg-1.0.dist-info/WHEEL":    "Wheel-Version: 1.0\nGenerator: confine-bench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
	} {
		if err := add(name, body); err != nil {
			return nil, err
		}
	}
	record.WriteString("bench_pkg-1.0.dist-info/RECORD,,\n")
	w, err := zw.Create("bench_pkg-1.0.dist-info/RECORD")
	if err != nil {
		return nil, err
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (b *bench) guardPip(reps int) error {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import venv, ensurepip").Run(); err != nil {
		b.add(&Row{ID: "guard_pip", Name: "python3 -m venv and pip install (local wheel)", Met: "n/a", Notes: "skipped: " + py + " without venv or ensurepip"})
		return nil
	}
	const modules = 300
	whl, err := benchWheel(modules)
	if err != nil {
		return err
	}
	files := map[string][]byte{"bench_pkg-1.0-py3-none-any.whl": whl}
	dir := filepath.Join(b.wd, "guard-pip")
	s, err := b.guardPairs(reps, dir, files, func(box) (float64, error) {
		return b.timedConfine(dir, opts{}, "sh", "-c", py+" -m venv .venv && .venv/bin/python -m pip install -q --no-index --no-cache-dir "+
			"--disable-pip-version-check ./bench_pkg-1.0-py3-none-any.whl")
	})
	if err != nil {
		return fmt.Errorf("guard_pip: %w", err)
	}
	b.guardRow("guard_pip", fmt.Sprintf("python3 -m venv .venv (ensurepip) and pip install of a local wheel (%d modules), --backend core, without / with .git", modules),
		s, 1.10, "wall time of confine run, launch included")
	return nil
}

func (b *bench) guardGoBuild(reps int) error {
	if b.goroot == "" {
		b.add(&Row{ID: "guard_gobuild", Name: "go build", Met: "n/a", Notes: "skipped: no go toolchain"})
		return nil
	}
	files := map[string][]byte{
		"go.mod": []byte("module example.com/guardbench\n\ngo 1.22\n"),
		"main.go": []byte("package main\n\nimport (\n\t\"encoding/json\"\n\t\"fmt\"\n\t\"os\"\n\t\"strings\"\n)\n\n" +
			"func main() {\n\tb, _ := json.Marshal(strings.Fields(\"guard bench\"))\n\tfmt.Fprintln(os.Stdout, string(b))\n}\n"),
	}
	dir := filepath.Join(b.wd, "guard-gobuild")
	goBin := filepath.Join(b.goroot, "bin", "go")
	s, err := b.guardPairs(reps, dir, files, func(box) (float64, error) {
		var ro []string
		if !strings.HasPrefix(b.goroot, "/usr/") {
			ro = []string{"--ro", b.goroot}
		}
		return b.timedConfine(dir, opts{confine: ro,
			env: []string{"GOCACHE=" + filepath.Join(dir, ".gocache"), "GOFLAGS=-mod=mod -buildvcs=false", "GOPROXY=off", "GOTOOLCHAIN=local"}},
			goBin, "build", "-o", "./app", ".")
	})
	if err != nil {
		return fmt.Errorf("guard_gobuild: %w", err)
	}
	b.guardRow("guard_gobuild", "go build -o ./app of a program importing encoding/json, fmt, os, strings with a fresh GOCACHE in the tree (the standard library compiled), --backend core, without / with .git",
		s, 1.10, "wall time of confine run, launch included")
	return nil
}
