//go:build linux

package escape

import (
	"archive/zip"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// The recipe profiles (--profile go, rust, node, python, c) build or run a
// real small project offline in the sandbox, as root and as uid 65534. A
// toolchain that is missing, or not usable by that uid unconfined (root's
// ~/.rustup is under /root, mode 0700), skips with the reason; a failure
// in the sandbox is a failure (too strict), never worked around.
func TestRecipe(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			t.Run("go", func(t *testing.T) { recipeGo(t, u) })
			t.Run("rust", func(t *testing.T) { recipeRust(t, u) })
			t.Run("node", func(t *testing.T) { recipeNode(t, u) })
			t.Run("python", func(t *testing.T) { recipePython(t, u) })
			t.Run("c", func(t *testing.T) { recipeC(t, u) })
		})
	}
}

// recipePATH is the CLI's PATH for a recipe run: dirs first, then the
// control PATH. The recipe discovers its toolchain on it, and the run's
// PATH is derived from it.
func recipePATH(dirs ...string) string {
	return "PATH=" + strings.Join(append(dirs, strings.TrimPrefix(controlPATH, "PATH=")), ":")
}

// lookIn finds prog on the PATH of env (NAME=VALUE entries, last wins).
func lookIn(env []string, prog string) string {
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, d := range strings.Split(path, ":") {
		p := filepath.Join(d, prog)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// needTool skips unless prog is on env's PATH and `prog args...` runs
// unconfined as u with env; it returns prog's path.
func needTool(t *testing.T, u testutil.User, env []string, prog string, args ...string) string {
	t.Helper()
	p := lookIn(env, prog)
	if p == "" {
		t.Skipf("not applicable: %s is not on %s", prog, recipePATHOf(env))
	}
	cmd := asUser(u, testutil.SharedDir(t), append([]string{p}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("not applicable to %s: %s %s fails unconfined as uid %d (the toolchain is not usable by that user): %v: %s",
			u.Name, p, strings.Join(args, " "), u.UID, err, fx.OneLine(string(out), 200))
	}
	return p
}

func recipePATHOf(env []string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if strings.HasPrefix(env[i], "PATH=") {
			return env[i]
		}
	}
	return controlPATH
}

// writeTree writes files (relative names) under root and gives root's
// whole tree to u.
func writeTree(t *testing.T, u testutil.User, root string, files map[string]string) {
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
	chownTree(t, u, root)
}

// chownTree gives root's tree to u. A regular file with more than one
// link is left alone: it is a hard link to a file outside the tree (a
// toolchain binary), whose owner must not change.
func chownTree(t *testing.T, u testutil.User, root string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			var st syscall.Stat_t
			if err := syscall.Lstat(p, &st); err != nil {
				return err
			}
			if st.Nlink > 1 {
				return nil
			}
		}
		return os.Lchown(p, u.UID, u.UID)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recipeRun runs `sh -c script` under --profile profile as u in wd, with
// env added to the CLI's environment, and requires exit 0 and want in
// stdout.
func recipeRun(t *testing.T, u testutil.User, wd, profile string, env []string, script, want string) outcome {
	t.Helper()
	o := cliRun(t, u, wd, env, "run", "--workdir", wd, "--timeout", workTimeout().String(), "--profile", profile, "--", "sh", "-c", script)
	if o.code != 0 || !strings.Contains(o.stdout, want) {
		t.Fatalf("recipe %s failed in the sandbox as %s (too strict?): exit %d, want stdout containing %q\nstdout: %s\nstderr: %s",
			profile, u.Name, o.code, want, o.stdout, o.stderr)
	}
	t.Logf("ok in %v: %s", o.elapsed.Round(1e6), fx.OneLine(o.stdout, 200))
	return o
}

// --- go: a module with a dependency from a read-only module cache.

var (
	goCacheOnce sync.Once
	goCacheDir  string
	goSum       string
	goCacheErr  error
)

const (
	greetVersion = "v1.0.0"
	greetMod     = "module example.com/greet\n\ngo 1.22\n"
	greetSrc     = "package greet\n\nfunc Hello() string { return \"hello from greet " + greetVersion + "\" }\n"
	goAppMod     = "module example.com/app\n\ngo 1.22\n\nrequire example.com/greet " + greetVersion + "\n"
	goAppMain    = "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/greet\"\n)\n\nfunc main() { fmt.Println(greet.Hello()) }\n"
)

// goModuleCache builds, once per test process and unconfined, a file-based
// module proxy holding example.com/greet and a module cache filled from it
// by `go mod download`, then makes the cache read-only. It returns the
// cache and the go.sum that download wrote.
func goModuleCache(t *testing.T, goBin string) (string, string) {
	t.Helper()
	goCacheOnce.Do(func() { goCacheDir, goSum, goCacheErr = fillGoModuleCache(t, goBin) })
	if goCacheErr != nil {
		t.Fatalf("setting up the module cache (unconfined): %v", goCacheErr)
	}
	return goCacheDir, goSum
}

func fillGoModuleCache(t *testing.T, goBin string) (cache, sum string, err error) {
	shared := testutil.SharedDir(t)
	base, err := os.MkdirTemp(shared, "goproxy-")
	if err != nil {
		return "", "", err
	}
	if err := os.Chmod(base, 0o755); err != nil {
		return "", "", err
	}
	// The file-based GOPROXY layout: MODULE/@v/list, VERSION.info,
	// VERSION.mod, VERSION.zip.
	at := filepath.Join(base, "proxy", "example.com", "greet", "@v")
	files := map[string]string{
		filepath.Join(at, "list"):                greetVersion + "\n",
		filepath.Join(at, greetVersion+".info"):  `{"Version":"` + greetVersion + `","Time":"2024-01-01T00:00:00Z"}` + "\n",
		filepath.Join(at, greetVersion+".mod"):   greetMod,
		filepath.Join(base, "app", "go.mod"):     goAppMod,
		filepath.Join(base, "app", "main.go"):    goAppMain,
		filepath.Join(base, "home", ".keep"):     "",
		filepath.Join(base, "gocache", ".keep"):  "",
		filepath.Join(base, "modcache", ".keep"): "",
	}
	for p, body := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", "", err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return "", "", err
		}
	}
	// The module zip layout: every file under "module@version/".
	zf, err := os.Create(filepath.Join(at, greetVersion+".zip"))
	if err != nil {
		return "", "", err
	}
	zw := zip.NewWriter(zf)
	for name, body := range map[string]string{"go.mod": greetMod, "greet.go": greetSrc} {
		w, err := zw.Create("example.com/greet@" + greetVersion + "/" + name)
		if err == nil {
			_, err = io.WriteString(w, body)
		}
		if err != nil {
			zf.Close()
			return "", "", err
		}
	}
	if err := zw.Close(); err != nil {
		zf.Close()
		return "", "", err
	}
	if err := zf.Close(); err != nil {
		return "", "", err
	}
	cache = filepath.Join(base, "modcache")
	cmd := exec.Command(goBin, "mod", "download")
	cmd.Dir = filepath.Join(base, "app")
	cmd.Env = []string{controlPATH, "HOME=" + filepath.Join(base, "home"), "GOCACHE=" + filepath.Join(base, "gocache"),
		"GOMODCACHE=" + cache, "GOPROXY=file://" + filepath.Join(base, "proxy"), "GOFLAGS=-mod=mod",
		// example.com is not in the public checksum database.
		"GONOSUMDB=example.com", "GOTOOLCHAIN=local"}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", errors.New("go mod download: " + err.Error() + ": " + string(out))
	}
	b, err := os.ReadFile(filepath.Join(base, "app", "go.sum"))
	if err != nil {
		return "", "", err
	}
	if _, err := os.Stat(filepath.Join(cache, "example.com", "greet@"+greetVersion, "greet.go")); err != nil {
		return "", "", err
	}
	// A directory every uid could write, were it not for the sandbox: the
	// run must not be able to write it (the recipe grants the cache
	// read-only). Everything else is read-only to everyone.
	canary := filepath.Join(cache, "writable-canary")
	if err := os.Mkdir(canary, 0o777); err != nil {
		return "", "", err
	}
	err = filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case p == canary:
			return os.Chmod(p, 0o777)
		case d.IsDir():
			return os.Chmod(p, 0o555)
		default:
			return os.Chmod(p, 0o444)
		}
	})
	if err != nil {
		return "", "", err
	}
	return cache, string(b), nil
}

func recipeGo(t *testing.T, u testutil.User) {
	goBin := goCommand
	if goBin == "" {
		t.Skip("not applicable: no go command")
	}
	goDir := filepath.Dir(goBin)
	cache, sum := goModuleCache(t, goBin)
	env := []string{recipePATH(goDir), "GOMODCACHE=" + cache}
	needTool(t, u, env, "go", "version")
	wd := testutil.Workdir(t, u.UID)
	writeTree(t, u, wd, map[string]string{"go.mod": goAppMod, "main.go": goAppMain, "go.sum": sum})
	// go build ./... writes ./app (one main package); GOPROXY=off and a
	// cache the run cannot write: the dependency can only come from it.
	script := `go build ./... && ./app && go env GOPROXY GOFLAGS GOMODCACHE && ` +
		`if touch "$GOMODCACHE/writable-canary/x" 2>/dev/null; then echo cache-writable; else echo cache-read-only; fi`
	want := "hello from greet " + greetVersion + "\noff\n-mod=mod\n" + cache + "\ncache-read-only\n"
	recipeRun(t, u, wd, "go", env, script, want)
	if _, err := os.Stat(filepath.Join(cache, "writable-canary", "x")); err == nil {
		t.Fatal("the run wrote into the read-only module cache")
	}
}

// --- rust: a crate without dependencies, cargo build --offline.

// rustEnv is the CLI environment for the rust recipe: cargo's directory on
// PATH, and the caller's HOME, CARGO_HOME and RUSTUP_HOME, which the recipe
// reads.
func rustEnv(t *testing.T) ([]string, string) {
	cargo, err := exec.LookPath("cargo")
	if err != nil {
		t.Skipf("not applicable: cargo is not installed (%v)", err)
	}
	env := []string{recipePATH(filepath.Dir(cargo))}
	for _, n := range []string{"HOME", "CARGO_HOME", "RUSTUP_HOME"} {
		if v := os.Getenv(n); v != "" {
			env = append(env, n+"="+v)
		}
	}
	return env, cargo
}

const rustMain = "fn main() {\n    let v: Vec<u32> = (1..=4).collect();\n    println!(\"hello from rust, sum {}\", v.iter().sum::<u32>());\n}\n"

func recipeRust(t *testing.T, u testutil.User) {
	env, _ := rustEnv(t)
	needTool(t, u, env, "cargo", "--version")
	wd := testutil.Workdir(t, u.UID)
	writeTree(t, u, wd, map[string]string{
		"Cargo.toml":  "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
		"src/main.rs": rustMain,
	})
	recipeRun(t, u, wd, "rust", env, `cargo build --offline && ./target/debug/hello && echo "CARGO_NET_OFFLINE=$CARGO_NET_OFFLINE"`,
		"hello from rust, sum 10\nCARGO_NET_OFFLINE=true\n")
}

// --- node: an npm project with a local dependency.

var nodeFiles = map[string]string{
	"package.json":     `{"name": "app", "version": "1.0.0", "private": true, "dependencies": {"dep": "file:./dep"}}` + "\n",
	"dep/package.json": `{"name": "dep", "version": "1.0.0", "main": "index.js"}` + "\n",
	"dep/index.js":     "module.exports = (n) => `hello from dep ${n}`;\n",
	"index.js":         "console.log(require(\"dep\")(7));\n",
}

func recipeNode(t *testing.T, u testutil.User) {
	env := []string{controlPATH}
	needTool(t, u, env, "node", "--version")
	wd := testutil.Workdir(t, u.UID)
	if lookIn(env, "npm") == "" {
		// Debian's nodejs package comes without npm: require the local
		// module by path instead of installing it.
		t.Logf("npm is not on %s: running node on a local module without npm install", controlPATH)
		files := map[string]string{"dep/index.js": nodeFiles["dep/index.js"], "index.js": "console.log(require(\"./dep\")(7));\n"}
		writeTree(t, u, wd, files)
		recipeRun(t, u, wd, "node", env, "node index.js", "hello from dep 7\n")
		return
	}
	needTool(t, u, env, "npm", "--version")
	writeTree(t, u, wd, nodeFiles)
	recipeRun(t, u, wd, "node", env, `npm install --offline && node index.js && npm config get offline`, "hello from dep 7\ntrue\n")
}

// --- python: a package and its tests, with pytest when it is installed.

var pythonFiles = map[string]string{
	"mypkg/__init__.py":   "",
	"mypkg/calc.py":       "def add(a, b):\n    return a + b\n",
	"tests/__init__.py":   "",
	"tests/test_calc.py":  "import unittest\n\nfrom mypkg.calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_neg(self):\n        self.assertEqual(add(-2, -3), -5)\n",
	"tests/test_plain.py": "from mypkg.calc import add\n\n\ndef test_strings():\n    assert add(\"a\", \"b\") == \"ab\"\n",
}

func recipePython(t *testing.T, u testutil.User) {
	env := []string{controlPATH}
	py := needTool(t, u, env, "python3", "--version")
	wd := testutil.Workdir(t, u.UID)
	writeTree(t, u, wd, pythonFiles)
	probe := asUser(u, wd, py, "-c", "import pytest")
	if err := probe.Run(); err != nil {
		t.Logf("pytest is not importable by %s (%v; Debian package python3-pytest): running the unittest tests instead", py, err)
		recipeRun(t, u, wd, "python", env, `python3 -m unittest discover -s tests -t . -v 2>&1 && echo "PIP_NO_INDEX=$PIP_NO_INDEX"`,
			"Ran 2 tests")
		return
	}
	recipeRun(t, u, wd, "python", env, `python3 -m pytest -q tests && echo "PIP_NO_INDEX=$PIP_NO_INDEX"`, "3 passed")
}

// --- c: two files and a header.

func recipeC(t *testing.T, u testutil.User) {
	env := []string{controlPATH}
	cc := "gcc"
	if lookIn(env, cc) == "" {
		cc = "cc"
	}
	needTool(t, u, env, cc, "--version")
	wd := testutil.Workdir(t, u.UID)
	writeTree(t, u, wd, map[string]string{
		"util.h": "#ifndef UTIL_H\n#define UTIL_H\nint triple(int x);\n#endif\n",
		"util.c": "#include \"util.h\"\nint triple(int x) { return 3 * x; }\n",
		"main.c": "#include <stdio.h>\n#include \"util.h\"\nint main(void) { printf(\"triple %d from util.c\\n\", triple(14)); return 0; }\n",
	})
	recipeRun(t, u, wd, "c", env, cc+" -Wall -Werror -O2 -o prog main.c util.c && ./prog", "triple 42 from util.c\n")
}

// --- credentials: no recipe grants the home directory, and cargo's
// credentials stay hidden in whatever CARGO_HOME the recipe grants.

const (
	homeCanary  = "home-canary-7f3a"
	npmCanary   = "npm-canary-7f3a"
	cargoCanary = "cargo-canary-7f3a"
)

// cargoHomeCopy makes dir a cargo home holding credentials.toml and
// credentials (readable by u, so only the sandbox can keep them from it)
// and, when cargo is a rustup proxy, bin/ with rustup linked in and cargo
// and rustc pointing at it.
func cargoHomeCopy(t *testing.T, u testutil.User, dir, cargo string) {
	t.Helper()
	writeTree(t, u, dir, map[string]string{
		"credentials.toml": "[registry]\ntoken = \"" + cargoCanary + "\"\n",
		"credentials":      "[registry]\ntoken = \"" + cargoCanary + "\"\n",
	})
	real, err := filepath.EvalSymlinks(cargo)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(real) != "rustup" {
		return
	}
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(real, filepath.Join(bin, "rustup")); err != nil {
		if err := fx.CopyExecutable(real, filepath.Join(bin, "rustup")); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"cargo", "rustc"} {
		if err := os.Symlink("rustup", filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	chownTree(t, u, dir)
}

// leakScript tries to read every planted secret and list the home
// directory; each success prints a LEAK line.
func leakScript(home string, files ...string) string {
	var b strings.Builder
	for _, f := range files {
		p := filepath.Join(home, f)
		b.WriteString(`if cat '` + p + `'; then echo "LEAK ` + p + `"; fi; `)
	}
	b.WriteString(`if ls -a '` + home + `' >/dev/null; then echo "LEAK listing ` + home + `"; fi; true`)
	return b.String()
}

func checkNoLeak(t *testing.T, o outcome) {
	t.Helper()
	for _, c := range []string{homeCanary, npmCanary, cargoCanary, "LEAK"} {
		if strings.Contains(o.stdout, c) {
			t.Errorf("the recipe exposed a secret (%s):\nstdout: %s\nstderr: %s", c, o.stdout, o.stderr)
		}
	}
}

func TestRecipeCredentials(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			// A home directory with secrets in it, and the caches the
			// recipes find there: each recipe resolved against it grants
			// the caches, never the home itself.
			t.Run("home", func(t *testing.T) {
				e := newEnv(t, u, false)
				home := e.freshDir("home-")
				writeTree(t, u, home, map[string]string{
					"canary.txt":          homeCanary + "\n",
					".npmrc":              "//registry.npmjs.org/:_authToken=" + npmCanary + "\n",
					".npm/_cacache/.keep": "",
					"go/pkg/mod/.keep":    "",
				})
				secrets := []string{"canary.txt", ".npmrc", ".cargo/credentials.toml", ".cargo/credentials"}
				// The control: unconfined, u reads every planted secret.
				ctl := asUser(u, home, "sh", "-c", leakScript(home, secrets[:2]...))
				if out, _ := ctl.CombinedOutput(); !strings.Contains(string(out), homeCanary) || !strings.Contains(string(out), npmCanary) {
					t.Fatalf("control: %s cannot read the planted secrets unconfined, the test would prove nothing: %s", u.Name, out)
				}
				type rcase struct {
					recipe, tool string
					args         []string
					env          []string
				}
				cases := []rcase{
					{"go", "go", []string{"version"}, nil},
					{"node", "node", []string{"--version"}, nil},
					{"python", "python3", []string{"--version"}, nil},
					{"c", "gcc", []string{"--version"}, nil},
				}
				if goCommand != "" {
					cases[0].env = []string{recipePATH(filepath.Dir(goCommand))}
				}
				if cargo, err := exec.LookPath("cargo"); err == nil {
					cargoHomeCopy(t, u, filepath.Join(home, ".cargo"), cargo)
					renv := []string{recipePATH(filepath.Join(home, ".cargo", "bin"), filepath.Dir(cargo))}
					if rh := rustupHome(); rh != "" {
						renv = append(renv, "RUSTUP_HOME="+rh)
					}
					cases = append(cases, rcase{"rust", "cargo", []string{"--version"}, renv})
				} else {
					t.Logf("rust: not applicable: cargo is not installed (%v)", err)
				}
				for _, c := range cases {
					t.Run(c.recipe, func(t *testing.T) {
						env := append([]string{controlPATH}, c.env...)
						env = append(env, "HOME="+home)
						needTool(t, u, env, c.tool, c.args...)
						wd := testutil.Workdir(t, u.UID)
						script := c.tool + " " + strings.Join(c.args, " ") + " >/dev/null && echo tool-ok; " + leakScript(home, secrets...)
						o := recipeRun(t, u, wd, c.recipe, env, script, "tool-ok\n")
						checkNoLeak(t, o)
					})
				}
			})
			// The rust recipe with CARGO_HOME pointed at a copy that is not
			// named .cargo and has no config.toml or registry/ (so the
			// run's own credential re-deny does not recognise it as a cargo
			// home): the recipe hides credentials.toml and credentials
			// itself, and cargo still runs.
			t.Run("rust-cargo-home-elsewhere", func(t *testing.T) {
				env, cargo := rustEnv(t)
				e := newEnv(t, u, false)
				ch := filepath.Join(e.freshDir("ch-"), "cargo-home")
				cargoHomeCopy(t, u, ch, cargo)
				env = append(env, recipePATH(filepath.Join(ch, "bin"), filepath.Dir(cargo)), "CARGO_HOME="+ch)
				if rh := rustupHome(); rh != "" {
					env = append(env, "RUSTUP_HOME="+rh)
				}
				needTool(t, u, env, "cargo", "--version")
				ctl := asUser(u, ch, "cat", filepath.Join(ch, "credentials.toml"))
				if out, _ := ctl.CombinedOutput(); !strings.Contains(string(out), cargoCanary) {
					t.Fatalf("control: %s cannot read the planted credentials unconfined: %s", u.Name, out)
				}
				// The run's CARGO_HOME is its own kept cache, which links
				// the caller's registry: reach the caller's credentials by
				// name and through a link's parent.
				writeTree(t, u, ch, map[string]string{"registry/index/.keep": ""})
				wd := testutil.Workdir(t, u.UID)
				script := `cargo --version && echo "CARGO_HOME=$CARGO_HOME"; CALLER=` + ch + `; ` +
					`for f in "$CARGO_HOME/credentials.toml" "$CARGO_HOME/credentials" "$CALLER/credentials.toml" "$CALLER/credentials" ` +
					`"$CARGO_HOME/registry/index/../../credentials.toml"; do if cat "$f"; then echo "LEAK $f"; fi; done; true`
				o := recipeRun(t, u, wd, "rust", env, script, "CARGO_HOME=")
				if !strings.Contains(o.stdout, "cargo 1.") {
					t.Errorf("cargo --version printed no version: %s", o.stdout)
				}
				checkNoLeak(t, o)
			})
			// A cache the caller configured as the home directory itself
			// is refused, not granted.
			t.Run("node-cache-is-home", func(t *testing.T) {
				env := []string{controlPATH}
				needTool(t, u, env, "npm", "--version")
				e := newEnv(t, u, false)
				home := e.freshDir("home-")
				writeTree(t, u, home, map[string]string{".npmrc": "cache=" + home + "\n", "canary.txt": homeCanary + "\n"})
				wd := testutil.Workdir(t, u.UID)
				env = append(env, "HOME="+home)
				o := cliRun(t, u, wd, env, "run", "--workdir", wd, "--profile", "node", "--", "cat", filepath.Join(home, "canary.txt"))
				if o.code != 125 || !strings.Contains(o.stderr, "recipe node: npm cache "+home+" is or contains the home directory") {
					t.Fatalf("want exit 125 refusing the home directory as npm's cache; got exit %d\nstdout: %s\nstderr: %s", o.code, o.stdout, o.stderr)
				}
				checkNoLeak(t, o)
				t.Logf("refused: %s", fx.OneLine(o.stderr, 200))
			})
		})
	}
}

// rustupHome is where rustup keeps toolchains for the test's own user.
func rustupHome() string {
	if v := os.Getenv("RUSTUP_HOME"); v != "" {
		return v
	}
	if h, err := os.UserHomeDir(); err == nil {
		if _, err := os.Stat(filepath.Join(h, ".rustup")); err == nil {
			return filepath.Join(h, ".rustup")
		}
	}
	return ""
}
