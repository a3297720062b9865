//go:build linux

package main

import (
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// ---- warmtools: the rust and node recipes' kept caches ----

// warmTools times, bare and under `confine run --profile rust|node` with
// the recipe's kept cache, a rebuild of a two-crate cargo workspace after
// an edit of its binary (cargo, no network) and `npm ci` of a lockfile
// whose package is in npm's cache (offline). Each box has a directory of
// its own, so the two never invalidate each other's target/. A toolchain
// that is missing gives its row "unavailable" and no figure.
func (b *bench) warmTools() error {
	reps := b.knobInt("CACHE_RUNS", 3)
	var errs []error
	if err := b.warmRust(reps); err != nil {
		errs = append(errs, fmt.Errorf("rust: %w", err))
	}
	if err := b.warmNode(reps); err != nil {
		errs = append(errs, fmt.Errorf("node: %w", err))
	}
	return errors.Join(errs...)
}

// timeInterleaved runs prep then the measured command for bare and
// confine, reps rounds in a shuffled order, after one warm-up each.
func (b *bench) timeInterleaved(id, name string, reps int, cmd func(box) *exec.Cmd) error {
	once := func(x box) (float64, error) {
		c := cmd(x)
		t0 := time.Now()
		_, err := runOut(c)
		d := time.Since(t0).Seconds()
		if err != nil {
			return 0, fmt.Errorf("%s %s: %w", id, x, err)
		}
		fmt.Fprintf(os.Stderr, "bench:   %s %s: %.2fs\n", id, x, d)
		return d, nil
	}
	for _, x := range []box{bare, confine} {
		if _, err := once(x); err != nil {
			return err
		}
	}
	s := map[box][]float64{}
	for i := 0; i < reps; i++ {
		for _, k := range rand.Perm(2) {
			x := []box{bare, confine}[k]
			d, err := once(x)
			if err != nil {
				return err
			}
			s[x] = append(s[x], d)
		}
	}
	r := newRow(id, name, "s", 2)
	b.fill(r, s)
	r.Text[bwrap] = ""
	r.Notes = fmt.Sprintf("%d interleaved runs each, after one warm-up; runs (s): %s", reps, sampleText(r, 2))
	b.add(r)
	return nil
}

func (b *bench) unavailableRow(id, name, why string) {
	r := newRow(id, name, "s", 2)
	r.Text[bare], r.Text[confine], r.Text[bwrap] = "unavailable", "unavailable", ""
	r.Notes = why
	b.add(r)
}

func writeTree(root string, files map[string]string) error {
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) warmRust(reps int) error {
	const id, name = "warmcache-rust", "cargo rebuild of a two-crate workspace after an edit: bare vs `confine run --profile rust` with its kept cache"
	out, err := exec.Command("rustc", "--print", "sysroot").Output()
	if err != nil {
		b.unavailableRow(id, name, "rustc not found or failed: "+err.Error())
		return nil
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "bin")
	if _, err := os.Stat(filepath.Join(bin, "cargo")); err != nil {
		b.unavailableRow(id, name, "no cargo beside rustc in "+bin)
		return nil
	}
	dirs := map[box]string{}
	for _, x := range []box{bare, confine} {
		d := filepath.Join(b.wd, "rust-"+string(x))
		dirs[x] = d
		if err := writeTree(d, map[string]string{
			"Cargo.toml":      "[workspace]\nmembers = [\"app\", \"dep\"]\nresolver = \"2\"\n",
			"app/Cargo.toml":  "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ndep = { path = \"../dep\" }\n",
			"app/src/main.rs": "fn main() { println!(\"{}\", dep::hi()); }\n",
			"dep/Cargo.toml":  "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
			"dep/src/lib.rs":  "pub fn hi() -> &'static str { \"hi\" }\n",
		}); err != nil {
			return err
		}
	}
	defer os.RemoveAll(dirs[bare])
	defer os.RemoveAll(dirs[confine])
	cacheDir := filepath.Join(b.tmp, "confine-caches", "rust")
	o := opts{path: bin + ":/usr/bin:/bin", env: []string{"CARGO_HOME=" + filepath.Join(b.home, ".cargo"), "CARGO_NET_OFFLINE=true"}}
	script := "touch app/src/main.rs && cargo build -q"
	return b.timeInterleaved(id, name, reps, func(x box) *exec.Cmd {
		oo := o
		if x == confine {
			oo.env = nil // the recipe sets them
			oo.confine = []string{"--workdir", dirs[x], "--profile", "rust"}
		}
		c := b.command(x, oo, "/bin/sh", "-c", script)
		c.Dir = dirs[x]
		if x == confine {
			c.Env = append(c.Env, "CONFINE_CACHE_DIR="+cacheDir)
		}
		return c
	})
}

func (b *bench) warmNode(reps int) error {
	const id, name = "warmcache-node", "`npm ci` offline of a lockfile from npm's cache: bare vs `confine run --profile node` with its kept cache"
	if _, err := exec.LookPath("npm"); err != nil {
		b.unavailableRow(id, name, "npm not found on PATH")
		return nil
	}
	// A package tarball, put into the caller's (the scratch HOME's) npm
	// cache once; confine's kept cache starts as a copy of it.
	pkg := filepath.Join(b.tmp, "npm-pkg")
	if err := writeTree(pkg, map[string]string{
		"package/package.json": `{"name":"bench-dep","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     `module.exports = "hi"`,
	}); err != nil {
		return err
	}
	defer os.RemoveAll(pkg)
	tgz := filepath.Join(pkg, "bench-dep-1.0.0.tgz")
	if out, err := exec.Command("tar", "czf", tgz, "-C", pkg, "package").CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	data, err := os.ReadFile(tgz)
	if err != nil {
		return err
	}
	sum := sha512.Sum512(data)
	integrity := "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
	env := []string{"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false", "npm_config_offline=true"}
	add := b.command(bare, opts{env: env}, "npm", "cache", "add", tgz)
	if _, err := runOut(add); err != nil {
		return err
	}
	dirs := map[box]string{}
	for _, x := range []box{bare, confine} {
		d := filepath.Join(b.wd, "node-"+string(x))
		dirs[x] = d
		if err := writeTree(d, map[string]string{
			"package.json": `{"name":"app","version":"1.0.0","dependencies":{"bench-dep":"1.0.0"}}`,
			"package-lock.json": `{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{` +
				`"":{"name":"app","version":"1.0.0","dependencies":{"bench-dep":"1.0.0"}},` +
				`"node_modules/bench-dep":{"version":"1.0.0","resolved":"https://registry.npmjs.org/bench-dep/-/bench-dep-1.0.0.tgz","integrity":"` + integrity + `"}}}`,
		}); err != nil {
			return err
		}
	}
	defer os.RemoveAll(dirs[bare])
	defer os.RemoveAll(dirs[confine])
	cacheDir := filepath.Join(b.tmp, "confine-caches", "node")
	return b.timeInterleaved(id, name, reps, func(x box) *exec.Cmd {
		o := opts{env: env}
		if x == confine {
			o.env = nil
			o.confine = []string{"--workdir", dirs[x], "--profile", "node"}
		}
		c := b.command(x, o, "npm", "ci")
		c.Dir = dirs[x]
		if x == confine {
			c.Env = append(c.Env, "CONFINE_CACHE_DIR="+cacheDir)
		}
		return c
	})
}
