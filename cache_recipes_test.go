//go:build linux

package confine_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// childEnv marks a test binary that runs one cache test alone, so the
// recipe it resolves (once per process) sees the caller's caches the
// test made up.
const childEnv = "CONFINE_TEST_CACHE_CHILD"

// inChild runs the calling test alone in a fresh test binary with env
// added, and reports its outcome; it returns false in that child, which
// then does the work.
func inChild(t *testing.T, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) != "" {
		return false
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"=1"), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("child test:\n%s", out)
	switch {
	case bytes.Contains(out, []byte("--- SKIP: "+t.Name())):
		t.Skip("skipped in the child (its reason above)")
	case err != nil || !bytes.Contains(out, []byte("--- PASS: "+t.Name())):
		t.Fatalf("child test: %v", err)
	}
	return true
}

// treeSum is a digest of everything under root: names, types, modes,
// link targets and contents.
func treeSum(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", strings.TrimPrefix(p, root), info.Mode())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			line += " -> " + l
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			line += " " + hex.EncodeToString(s[:])
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	if os.Getenv("CONFINE_TEST_TREES") != "" {
		t.Logf("tree %s:\n%s", root, strings.Join(lines, "\n"))
	}
	fmt.Fprintln(h, strings.Join(lines, "\n"))
	return hex.EncodeToString(h.Sum(nil))
}

// cacheRun runs script confined in wt with the profile's own environment.
func cacheRun(t *testing.T, c *policy.Cap, prof policy.Profile, wt, script string) spec.CommandResult {
	t.Helper()
	s := shSpec(wt, script)
	s.Env = append(s.Env, prof.Env.Set...)
	res, err := confine.RunCommand(context.Background(), c, s)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func unconfined(t *testing.T, dir string, env []string, script string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("unconfined %q: %v\n%s", script, err, out)
	}
	return string(out)
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// The rust recipe's CARGO_HOME is the run's own and kept: a git
// dependency that only the caller's cargo home holds (fetched by the
// caller, unconfined) builds offline in the run, through the caller's git
// database read-only, with its checkout written into the run's own home;
// the second run compiles nothing. A run that writes through its home's
// links into the caller's cargo home changes nothing there, while the
// same writes unconfined do.
func TestRustCacheWarmAndUnpoisoned(t *testing.T) {
	for _, tool := range []string{"cargo", "rustc", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("not applicable here: %s not on PATH", tool)
		}
	}
	if os.Getenv(childEnv) == "" {
		// The caller's cargo home is made up; cargo and rustc come from
		// the toolchain itself (not rustup's proxies in the real cargo
		// home, which the made-up one does not hold).
		sysroot, err := exec.Command("rustc", "--print", "sysroot").Output()
		if err != nil {
			t.Skipf("not applicable here: rustc --print sysroot: %v", err)
		}
		bin := filepath.Join(strings.TrimSpace(string(sysroot)), "bin")
		if _, err := os.Stat(filepath.Join(bin, "cargo")); err != nil {
			t.Skipf("not applicable here: no cargo beside rustc in %s", bin)
		}
		home := t.TempDir()
		if inChild(t, "CARGO_HOME="+filepath.Join(home, "cargo"), "PATH="+bin+":"+os.Getenv("PATH"),
			"CONFINE_TEST_HOME="+home) {
			return
		}
	}
	home := os.Getenv("CONFINE_TEST_HOME")
	callerCargo := os.Getenv("CARGO_HOME")
	t.Setenv("CONFINE_CACHE_DIR", filepath.Join(home, "confine"))
	writeFiles(t, callerCargo, map[string]string{"config.toml": "[term]\nquiet = false\n"})

	// The caller's side: a git repository of a crate, fetched into the
	// caller's cargo home as a git dependency of the work directory's
	// crate.
	repo := filepath.Join(home, "dep")
	writeFiles(t, repo, map[string]string{
		"Cargo.toml": "[package]\nname = \"dep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"src/lib.rs": "pub fn hi() -> &'static str { \"hi from git\" }\n",
	})
	unconfined(t, repo, nil, `git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm dep`)
	wt := worktree(t)
	writeFiles(t, wt, map[string]string{
		"Cargo.toml":  "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[dependencies]\ndep = { git = \"file://" + repo + "\" }\n",
		"src/main.rs": "fn main() { println!(\"{}\", dep::hi()); }\n",
	})
	unconfined(t, wt, nil, `cargo fetch -q`)
	// What the run derives from the database is its own, not the caller's.
	if err := os.RemoveAll(filepath.Join(callerCargo, "git", "checkouts")); err != nil {
		t.Fatal(err)
	}
	before := treeSum(t, callerCargo)

	_, c, err := mintErr("rust")
	if err != nil {
		t.Skipf("not applicable here: the rust recipe: %v", err)
	}
	prof, err := policy.ResolveProfile("rust")
	if err != nil {
		t.Fatal(err)
	}
	if v := envValue(prof.Env.Set, "CARGO_HOME"); v != callerCargo {
		t.Fatalf("the recipe's CARGO_HOME is %q, not the made-up caller's %s", v, callerCargo)
	}
	build := `cargo build 2>&1 && ./target/debug/app && echo "home=$CARGO_HOME"`
	res := cacheRun(t, c, prof, wt, build)
	out := res.Stdout.Text()
	t.Logf("first build:\n%s", out)
	if res.ExitCode != 0 || !strings.Contains(out, "Compiling dep") || !strings.Contains(out, "hi from git") || len(res.Caches) != 1 {
		t.Fatalf("first build: exit %d, caches %v\n%s%s", res.ExitCode, res.Caches, out, res.Stderr.Text())
	}
	own := strings.TrimPrefix(res.Caches[0], "CARGO_HOME=")
	if !strings.Contains(out, "home="+own+"\n") || spec.Within(callerCargo, own) {
		t.Fatalf("the run's CARGO_HOME: %q", out)
	}
	if m, _ := filepath.Glob(filepath.Join(own, "git", "checkouts", "dep-*")); len(m) == 0 {
		t.Errorf("no checkout of dep in the run's own cargo home %s", own)
	}
	res = cacheRun(t, c, prof, wt, build)
	t.Logf("second build:\n%s", res.Stdout.Text())
	if out := res.Stdout.Text(); res.ExitCode != 0 || strings.Contains(out, "Compiling") || !strings.Contains(out, "hi from git") {
		t.Fatalf("second build is not warm: exit %d\n%s%s", res.ExitCode, out, res.Stderr.Text())
	}

	// The attack: write through every link of the run's home into the
	// caller's, and into the caller's home by name.
	attack := `for d in "$CARGO_HOME/git/db" "$CARGO_HOME/registry/cache" "$CARGO_HOME/registry/index" "$CALLER"; do
		mkdir -p "$d/planted" 2>/dev/null && echo "planted in $d"
		for f in "$d"/*/*; do [ -f "$f" ] && echo x >> "$f" 2>/dev/null && echo "appended to $f"; done
	done
	echo '[build]' >> "$CARGO_HOME/config.toml" 2>/dev/null && echo "wrote config"
	echo '[build]' > "$CARGO_HOME/config" 2>/dev/null && echo "wrote config through a dangling link"
	touch "$CARGO_HOME/mine" && echo wrote-own`
	res = cacheRun(t, c, prof, wt, "CALLER="+callerCargo+"; "+attack)
	if out := res.Stdout.Text(); strings.Contains(out, "planted") || strings.Contains(out, "appended") || strings.Contains(out, "wrote config") || !strings.Contains(out, "wrote-own") {
		t.Fatalf("a run wrote into the caller's cargo home (or not into its own):\n%s", out)
	}
	if after := treeSum(t, callerCargo); after != before {
		t.Fatalf("the caller's cargo home changed under a confined run")
	}
	// Control: the same writes unconfined land in the caller's home.
	out = unconfined(t, wt, []string{"CARGO_HOME=" + own, "CALLER=" + callerCargo}, attack)
	if !strings.Contains(out, "planted in "+own+"/git/db") || treeSum(t, callerCargo) == before {
		t.Fatalf("control: unconfined, the attack did not reach the caller's cargo home:\n%s", out)
	}
}

func envValue(env []string, name string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
	}
	return ""
}

// npmTarball writes an npm package tarball of name@1.0.0 into dir and
// returns its file name and integrity.
func npmTarball(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"package/package.json": `{"name":"` + name + `","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     `module.exports = "hi from ` + name + `"`,
	})
	file := name + "-1.0.0.tgz"
	unconfined(t, src, nil, "tar czf "+filepath.Join(dir, file)+" package")
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(b)
	return file, "sha512-" + base64.StdEncoding.EncodeToString(sum[:])
}

// npmLock writes package.json and a lockfile in wt that install name from
// the registry (resolved URL and integrity, as npm writes them).
func npmLock(t *testing.T, wt, name, integrity string) {
	t.Helper()
	writeFiles(t, wt, map[string]string{
		"package.json": `{"name":"app","version":"1.0.0","dependencies":{"` + name + `":"1.0.0"}}`,
		"package-lock.json": `{"name":"app","version":"1.0.0","lockfileVersion":3,"requires":true,"packages":{` +
			`"":{"name":"app","version":"1.0.0","dependencies":{"` + name + `":"1.0.0"}},` +
			`"node_modules/` + name + `":{"version":"1.0.0","resolved":"https://registry.npmjs.org/` + name + `/-/` + name + `-1.0.0.tgz","integrity":"` + integrity + `"}}}`,
	})
}

// The node recipe's npm cache is the run's own, a copy of the caller's
// made when it is created, and kept: a package only the caller's cache
// holds installs offline in the first run; a package the first run adds
// to its cache installs offline in the second; the caller's cache is
// unchanged by all of it, and by writes aimed at it, which unconfined
// change it.
func TestNodeCacheWarmAndUnpoisoned(t *testing.T) {
	for _, tool := range []string{"node", "npm", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("not applicable here: %s not on PATH", tool)
		}
	}
	if os.Getenv(childEnv) == "" {
		home := t.TempDir()
		if inChild(t, "npm_config_cache="+filepath.Join(home, "npm-cache"), "CONFINE_TEST_HOME="+home) {
			return
		}
	}
	home := os.Getenv("CONFINE_TEST_HOME")
	callerCache := os.Getenv("npm_config_cache")
	t.Setenv("CONFINE_CACHE_DIR", filepath.Join(home, "confine"))
	quiet := []string{"npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false"}
	pkgs := t.TempDir()
	first, firstSum := npmTarball(t, pkgs, "confine-first")
	second, secondSum := npmTarball(t, pkgs, "confine-second")
	// The caller's cache holds the first package only.
	unconfined(t, pkgs, quiet, "npm cache add --offline ./"+first)
	before := treeSum(t, callerCache)

	_, c, err := mintErr("node")
	if err != nil {
		t.Skipf("not applicable here: the node recipe: %v", err)
	}
	prof, err := policy.ResolveProfile("node")
	if err != nil {
		t.Fatal(err)
	}
	wt := worktree(t)
	if err := os.WriteFile(filepath.Join(wt, second), mustRead(t, filepath.Join(pkgs, second)), 0o644); err != nil {
		t.Fatal(err)
	}
	npmLock(t, wt, "confine-first", firstSum)
	res := cacheRun(t, c, prof, wt, `npm ci 2>&1 && node -p 'require("confine-first")' && npm cache add ./`+second+` 2>&1 && echo "cache=$npm_config_cache"`)
	out := res.Stdout.Text()
	if res.ExitCode != 0 || !strings.Contains(out, "hi from confine-first") || len(res.Caches) != 1 {
		t.Fatalf("first run: exit %d, caches %v\n%s%s", res.ExitCode, res.Caches, out, res.Stderr.Text())
	}
	own := strings.TrimPrefix(res.Caches[0], "npm_config_cache=")
	if !strings.Contains(out, "cache="+own+"\n") || own == callerCache {
		t.Fatalf("the run's npm cache: %q", out)
	}

	npmLock(t, wt, "confine-second", secondSum)
	res = cacheRun(t, c, prof, wt, `rm -rf node_modules && npm ci 2>&1 && node -p 'require("confine-second")'`)
	if out := res.Stdout.Text(); res.ExitCode != 0 || !strings.Contains(out, "hi from confine-second") {
		t.Fatalf("second run did not install what the first cached: exit %d\n%s%s", res.ExitCode, out, res.Stderr.Text())
	}

	// The attack: write into the caller's cache by name (the run has no
	// other way to it: its own cache is a copy, with no links).
	attack := `links=$(find "$npm_config_cache" -type l | wc -l); echo "links=$links"
	mkdir -p "$CALLER/_cacache/planted" 2>/dev/null && echo planted
	for f in $(find "$CALLER" -type f); do echo x >> "$f" 2>/dev/null && echo "appended to $f"; done
	npm_config_cache="$CALLER" npm cache add ./` + second + ` >/dev/null 2>&1 && echo "npm wrote"
	touch "$npm_config_cache/mine" && echo wrote-own`
	res = cacheRun(t, c, prof, wt, "CALLER="+callerCache+"; "+attack)
	if out := res.Stdout.Text(); strings.Contains(out, "planted") || strings.Contains(out, "appended") || strings.Contains(out, "npm wrote") ||
		!strings.Contains(out, "links=0\n") || !strings.Contains(out, "wrote-own") {
		t.Fatalf("a run wrote into the caller's npm cache (or not into its own):\n%s", out)
	}
	if after := treeSum(t, callerCache); after != before {
		t.Fatalf("the caller's npm cache changed under confined runs")
	}
	// Control: unconfined, the same writes land in the caller's cache.
	out = unconfined(t, wt, append(quiet, "npm_config_cache="+own, "CALLER="+callerCache), attack)
	if !strings.Contains(out, "npm wrote") || treeSum(t, callerCache) == before {
		t.Fatalf("control: unconfined, the attack did not reach the caller's npm cache:\n%s", out)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The go recipe's GOCACHEPROG reads the caller's GOCACHE through: a first
// run in a fresh work directory, with an empty confine cache, compiles
// only its own package (the standard library comes from the caller's
// cache), and what it puts lands in its own cache, never in the caller's.
func TestGoCacheReadThrough(t *testing.T) {
	_, c, err := mintErr("go")
	if err != nil {
		t.Skipf("not applicable here: the go recipe: %v", err)
	}
	prof, err := policy.ResolveProfile("go")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	caller := strings.TrimSpace(string(out))
	if err != nil || !filepath.IsAbs(caller) {
		t.Skipf("not applicable here: no GOCACHE of the caller's to read through (%q, %v)", caller, err)
	}
	t.Setenv("CONFINE_CACHE_DIR", t.TempDir())
	mod := func(dir, extra string) {
		writeFiles(t, dir, map[string]string{"go.mod": "module example.com/hello\n\ngo 1.24\n", "main.go": "package main\n\nfunc main() {}\n" + extra})
	}
	// The caller has built the standard library this program needs (a
	// no-op if it had: go test built more than that).
	warm := t.TempDir()
	mod(warm, "")
	unconfined(t, warm, prof.Env.Set, "go build -o /dev/null .")

	wt := worktree(t)
	mod(wt, fmt.Sprintf("\nvar unique = %q\n", wt))
	res := cacheRun(t, c, prof, wt, "go build -x -o out . && ./out && echo built")
	var compiled []string
	for _, l := range strings.Split(res.Stderr.Text(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasSuffix(f[0], "/compile") {
			for i := range f[:len(f)-1] {
				if f[i] == "-p" {
					compiled = append(compiled, f[i+1])
				}
			}
		}
	}
	if res.ExitCode != 0 || !strings.Contains(res.Stdout.Text(), "built") || len(res.Caches) != 1 {
		t.Fatalf("build: exit %d, caches %v\n%s", res.ExitCode, res.Caches, res.Stderr.Text())
	}
	if len(compiled) != 1 || compiled[0] != "main" {
		t.Fatalf("a first run in a fresh work directory compiled %v; want only main, the rest read through from %s", compiled, caller)
	}
	own := strings.TrimPrefix(res.Caches[0], "GOCACHE=")
	// What the run put is in its own cache and not in the caller's: an
	// entry the caller lacks, and main's compiled package, whose body
	// holds the work directory's name (no other build made it).
	puts, unique := 0, 0
	entries, _ := filepath.Glob(filepath.Join(own, "*", "*-a"))
	for _, e := range entries {
		rel, _ := filepath.Rel(own, e)
		if _, err := os.Lstat(filepath.Join(caller, rel)); err == nil {
			continue // read through
		}
		puts++
		f := strings.Fields(string(mustRead(t, e)))
		if len(f) != 5 || len(f[2]) < 2 {
			t.Fatalf("entry %s: %q", e, f)
		}
		body := filepath.Join(f[2][:2], f[2]+"-d")
		b, err := os.ReadFile(filepath.Join(own, body))
		if err != nil {
			t.Fatalf("the run's own cache lacks the body %s of %s: %v", body, rel, err)
		}
		if !bytes.Contains(b, []byte(wt)) {
			continue // a body other builds make too (an empty one, say)
		}
		unique++
		if _, err := os.Lstat(filepath.Join(caller, body)); err == nil {
			t.Errorf("the run's put %s reached the caller's cache", body)
		}
	}
	if unique == 0 {
		t.Errorf("no entry of the run's own holds main's compiled package")
	}
	if puts == 0 || len(entries) <= puts {
		t.Fatalf("%d entries in the run's cache, %d of them put by the run: want both read-through and put entries", len(entries), puts)
	}
}
