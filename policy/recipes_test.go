package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/spec"
)

// mkdirs creates dirs (relative to base) and returns base.
func mkdirs(t *testing.T, base string, dirs ...string) {
	t.Helper()
	for _, d := range dirs {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func touch(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("x"), mode); err != nil {
		t.Fatal(err)
	}
}

// TestRecipeProfile maps discoveries (what a toolchain answered) to
// profiles: what is granted, what is set, and what is refused.
func TestRecipeProfile(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(base, "home")
	mkdirs(t, base, "home/.cargo/bin", "home/.cargo/registry", "home/.rustup/toolchains/x/bin",
		"goroot/bin", "modcache", "py/lib/python3/site-packages", "ch/bin", "ch/registry", "shims",
		"outer/cargo/bin", "outer/toolchains")
	touch(t, filepath.Join(base, "outer/cargo/credentials.toml"), 0o600)
	touch(t, filepath.Join(base, "goroot/bin/go"), 0o755)
	touch(t, filepath.Join(base, "home/.cargo/bin/cargo"), 0o755)
	touch(t, filepath.Join(base, "home/.cargo/credentials.toml"), 0o600)
	touch(t, filepath.Join(base, "ch/bin/cargo"), 0o755)
	touch(t, filepath.Join(base, "ch/env"), 0o644)
	touch(t, filepath.Join(base, "ch/credentials.toml"), 0o600)
	touch(t, filepath.Join(base, "ch/credentials"), 0o600)
	touch(t, filepath.Join(base, "shims/python3"), 0o755)
	touch(t, filepath.Join(base, "py/bin/python3"), 0o755)
	if err := os.Symlink(filepath.Join(base, "goroot/bin/go"), filepath.Join(base, "shims/go")); err != nil {
		t.Fatal(err)
	}
	j := func(p string) string { return filepath.Join(base, p) }
	goEnv := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"}

	tests := []struct {
		name    string
		tc      toolchain
		grants  []string // want ReadExec
		env     []string // want Env.Set entries (subset)
		noEnv   []string // variable names that must not be set
		desc    string   // Description contains
		err     string   // error contains (wrapping spec.ErrUnavailable)
		notRead []string // paths no grant may cover
	}{
		{name: "go", tc: toolchain{recipe: "go", version: "go1.26", tool: j("goroot/bin/go"), env: goEnv,
			dirs: []toolDir{{what: "GOROOT", path: j("goroot"), required: true}, {what: "module cache", path: j("modcache"), envVar: "GOMODCACHE"}}},
			grants: []string{j("goroot"), j("modcache")},
			env:    append([]string{"GOMODCACHE=" + j("modcache")}, goEnv...), desc: "go recipe: go1.26"},
		{name: "go-no-modcache", tc: toolchain{recipe: "go", env: goEnv,
			dirs: []toolDir{{what: "GOROOT", path: j("goroot"), required: true}, {what: "module cache", path: j("nosuch"), envVar: "GOMODCACHE"}}},
			grants: []string{j("goroot")}, env: goEnv, noEnv: []string{"GOMODCACHE"}, desc: "module cache " + j("nosuch") + " absent"},
		{name: "go-empty-modcache", tc: toolchain{recipe: "go",
			dirs: []toolDir{{what: "GOROOT", path: j("goroot"), required: true}, {what: "module cache", path: "", envVar: "GOMODCACHE"}}},
			grants: []string{j("goroot")}, noEnv: []string{"GOMODCACHE"}},
		{name: "required-missing", tc: toolchain{recipe: "go", dirs: []toolDir{{what: "GOROOT", path: j("nosuch"), required: true}}},
			err: "recipe go: GOROOT " + j("nosuch")},
		{name: "required-relative", tc: toolchain{recipe: "go", dirs: []toolDir{{what: "GOROOT", path: "go", required: true}}},
			err: "not an absolute path"},
		{name: "required-file", tc: toolchain{recipe: "go", dirs: []toolDir{{what: "GOROOT", path: j("goroot/bin/go"), required: true}}},
			err: "not a directory"},
		{name: "home-itself", tc: toolchain{recipe: "python", dirs: []toolDir{{what: "prefix", path: home, required: true}}},
			err: "home directory"},
		{name: "home-ancestor", tc: toolchain{recipe: "python", dirs: []toolDir{{what: "prefix", path: base}}},
			err: "home directory"},
		{name: "root", tc: toolchain{recipe: "python", dirs: []toolDir{{what: "prefix", path: "/"}}},
			err: "home directory"},
		{name: "system-roots-not-listed", tc: toolchain{recipe: "c", tool: "/bin/sh",
			dirs: []toolDir{{what: "search dir", path: "/usr/lib"}, {what: "search dir", path: "/usr"}}},
			grants: nil},
		{name: "nested-dirs-deduplicated", tc: toolchain{recipe: "python", tool: j("py/bin/python3"),
			dirs: []toolDir{{what: "purelib", path: j("py/lib/python3/site-packages")}, {what: "prefix", path: j("py"), required: true}, {what: "base_prefix", path: j("py")}}},
			grants: []string{j("py")}},
		{name: "cargo-home-named-.cargo-left-to-SplitReadGrant", tc: toolchain{recipe: "rust", tool: j("home/.cargo/bin/cargo"),
			dirs: []toolDir{{what: "CARGO_HOME", path: j("home/.cargo"), envVar: "CARGO_HOME", hide: cargoCredentialNames}}},
			grants: []string{j("home/.cargo")}, env: []string{"CARGO_HOME=" + j("home/.cargo")}},
		{name: "cargo-home-elsewhere-split-by-the-recipe", tc: toolchain{recipe: "rust", tool: j("ch/bin/cargo"),
			dirs: []toolDir{{what: "CARGO_HOME", path: j("ch"), envVar: "CARGO_HOME", hide: cargoCredentialNames}}},
			grants: []string{j("ch/bin"), j("ch/env"), j("ch/registry")}, env: []string{"CARGO_HOME=" + j("ch")},
			notRead: []string{j("ch/credentials.toml"), j("ch/credentials")}},
		{name: "cargo-home-inside-another-grant", tc: toolchain{recipe: "rust",
			dirs: []toolDir{{what: "CARGO_HOME", path: j("outer/cargo"), hide: cargoCredentialNames}, {what: "RUSTUP_HOME", path: j("outer")}}},
			grants:  []string{j("outer/cargo/bin"), j("outer/toolchains")},
			notRead: []string{j("outer/cargo/credentials.toml")}},
		{name: "credentials-in-a-system-root", tc: toolchain{recipe: "rust",
			dirs: []toolDir{{what: "CARGO_HOME", path: "/usr", hide: []string{"bin"}}}},
			err: "inside a system root every run reads"},
		{name: "tool-is-a-shim", tc: toolchain{recipe: "python", tool: j("shims/python3"), binDir: j("py/bin"),
			dirs: []toolDir{{what: "prefix", path: j("py"), required: true}}},
			err: "python3 on PATH is " + j("shims/python3") + ", outside what the recipe grants (" + j("py") + ")"},
		{name: "tool-symlinked-from-outside", tc: toolchain{recipe: "go", tool: j("shims/go"),
			dirs: []toolDir{{what: "GOROOT", path: j("goroot"), required: true}}},
			err: "put the toolchain's own bin directory first on PATH"},
		{name: "tool-missing", tc: toolchain{recipe: "go", tool: j("goroot/bin/gofmt"),
			dirs: []toolDir{{what: "GOROOT", path: j("goroot"), required: true}}},
			err: "no such file"},
		{name: "env-refused-by-the-sanitiser", tc: toolchain{recipe: "node", env: []string{"NPM_TOKEN=x"}},
			err: "NPM_TOKEN is refused"},
		{name: "path-list-env-checked", tc: toolchain{recipe: "python", env: []string{"PYTHONPATH=lib"}},
			err: "PYTHONPATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := recipeProfile(tt.tc, []string{home, ""})
			if tt.err != "" {
				if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ErrUnavailable containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(p.ReadExec) != fmt.Sprint(tt.grants) {
				t.Errorf("ReadExec = %v, want %v", p.ReadExec, tt.grants)
			}
			for _, kv := range tt.env {
				if !contains(p.Env.Set, kv) {
					t.Errorf("Env.Set = %v, missing %s", p.Env.Set, kv)
				}
			}
			for _, n := range tt.noEnv {
				for _, kv := range p.Env.Set {
					if strings.HasPrefix(kv, n+"=") {
						t.Errorf("Env.Set has %s", kv)
					}
				}
			}
			if !strings.Contains(p.Description, tt.desc) {
				t.Errorf("Description = %q, want %q", p.Description, tt.desc)
			}
			for _, s := range tt.notRead {
				if under(s, p.ReadExec) {
					t.Errorf("%s is covered by %v", s, p.ReadExec)
				}
			}
			checkRecipeInvariants(t, p, home)
		})
	}
}

// checkRecipeInvariants holds for every recipe profile.
func checkRecipeInvariants(t *testing.T, p Profile, home string) {
	t.Helper()
	if p.Tier != TierSandboxed || p.Network != spec.DenyAll || len(p.Writable) != 0 || len(p.Waive) != 0 || len(p.Env.Waive) != 0 || len(p.Env.Passthrough) != 0 {
		t.Errorf("recipe %s grants more than read roots and variables: %+v", p.Name, p)
	}
	if fmt.Sprint(p.Devices) != fmt.Sprint(DefaultDevices()) {
		t.Errorf("devices %v", p.Devices)
	}
	for _, r := range p.ReadExec {
		if err := checkPathSyntax(r); err != nil {
			t.Errorf("grant %q: %v", r, err)
		}
		if home != "" && spec.Within(home, r) {
			t.Errorf("grant %s is or contains the home directory %s", r, home)
		}
	}
	if _, err := SanitizeEnv(p.Env.Set, nil); err != nil {
		t.Error(err)
	}
}

// fakeHost answers discovery from tables: programs on PATH, and the
// output of each command line ("prog arg..."), plus the environment each
// was asked with.
type fakeHost struct {
	path  map[string]string
	out   map[string]string
	fail  map[string]string
	env   map[string]string
	home  string
	asked map[string][]string
}

func (f *fakeHost) host() *toolHost {
	f.asked = map[string][]string{}
	return &toolHost{
		lookPath: func(p string) (string, error) {
			if v, ok := f.path[p]; ok {
				return v, nil
			}
			return "", fmt.Errorf("exec: %q: executable file not found in $PATH", p)
		},
		run: func(extra []string, prog string, args ...string) ([]byte, error) {
			k := strings.Join(append([]string{prog}, args...), " ")
			f.asked[k] = extra
			if msg, ok := f.fail[k]; ok {
				return nil, errors.New(msg)
			}
			v, ok := f.out[k]
			if !ok {
				return nil, fmt.Errorf("unexpected command %q", k)
			}
			return []byte(v), nil
		},
		getenv:     func(k string) string { return f.env[k] },
		home:       func() string { return f.home },
		passwdHome: func() string { return "/nonexistent" },
	}
}

// TestDiscover checks what each recipe asks its toolchain and how it reads
// the answer, with the toolchain faked.
func TestDiscover(t *testing.T) {
	tests := []struct {
		name     string
		discover func(*toolHost) (toolchain, error)
		host     fakeHost
		want     toolchain
		asked    map[string][]string // command -> extra environment it must get
		err      string
	}{
		{name: "go", discover: discoverGo,
			host: fakeHost{path: map[string]string{"go": "/opt/go/bin/go"},
				out: map[string]string{"/opt/go/bin/go env -json GOROOT GOMODCACHE GOVERSION": `{"GOROOT": "/opt/go", "GOMODCACHE": "/h/go/pkg/mod", "GOVERSION": "go1.26.8"}`}},
			want: toolchain{recipe: "go", version: "go1.26.8", tool: "/opt/go/bin/go", binDir: "/opt/go/bin",
				dirs: []toolDir{{what: "GOROOT", path: "/opt/go", required: true}, {what: "module cache", path: "/h/go/pkg/mod", envVar: "GOMODCACHE"}},
				env:  []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"}, caches: []string{"GOCACHE=go-build"}},
			asked: map[string][]string{"/opt/go/bin/go env -json GOROOT GOMODCACHE GOVERSION": {"GOTOOLCHAIN=local"}}},
		{name: "go-missing", discover: discoverGo, host: fakeHost{}, err: "recipe go: go not found on PATH"},
		{name: "go-relative-path-entry", discover: discoverGo, host: fakeHost{path: map[string]string{"go": "bin/go"}}, err: "relative PATH entry"},
		{name: "go-fails", discover: discoverGo,
			host: fakeHost{path: map[string]string{"go": "/opt/go/bin/go"}, fail: map[string]string{"/opt/go/bin/go env -json GOROOT GOMODCACHE GOVERSION": "go: cannot find GOROOT directory"}},
			err:  "recipe go: asking the toolchain: go: cannot find GOROOT directory"},
		{name: "go-garbage", discover: discoverGo,
			host: fakeHost{path: map[string]string{"go": "/opt/go/bin/go"}, out: map[string]string{"/opt/go/bin/go env -json GOROOT GOMODCACHE GOVERSION": "hello"}},
			err:  "go env -json"},
		{name: "go-no-goroot", discover: discoverGo,
			host: fakeHost{path: map[string]string{"go": "/opt/go/bin/go"}, out: map[string]string{"/opt/go/bin/go env -json GOROOT GOMODCACHE GOVERSION": "{}"}},
			err:  "no GOROOT"},
		{name: "rust-defaults-under-home", discover: discoverRust,
			host: fakeHost{path: map[string]string{"rustc": "/h/.cargo/bin/rustc"}, home: "/h",
				out: map[string]string{"/h/.cargo/bin/rustc --print sysroot": "/h/.rustup/toolchains/stable\n"}},
			want: toolchain{recipe: "rust", version: "sysroot /h/.rustup/toolchains/stable", tool: "/h/.cargo/bin/rustc",
				dirs: []toolDir{{what: "sysroot", path: "/h/.rustup/toolchains/stable", required: true},
					{what: "CARGO_HOME", path: "/h/.cargo", envVar: "CARGO_HOME", hide: cargoCredentialNames},
					{what: "RUSTUP_HOME", path: "/h/.rustup", envVar: "RUSTUP_HOME"},
					{what: "system git configuration", path: "/etc/gitconfig", file: true}},
				env: []string{"CARGO_NET_OFFLINE=true"}, caches: []string{"CARGO_HOME=cargo-home"}},
			asked: map[string][]string{"/h/.cargo/bin/rustc --print sysroot": {"RUSTUP_AUTO_INSTALL=0"}}},
		{name: "rust-from-environment", discover: discoverRust,
			host: fakeHost{path: map[string]string{"rustc": "/usr/bin/rustc"}, home: "/h",
				env: map[string]string{"CARGO_HOME": "/ci/cargo/", "RUSTUP_HOME": "/ci/rustup"},
				out: map[string]string{"/usr/bin/rustc --print sysroot": "/usr"}},
			want: toolchain{recipe: "rust", version: "sysroot /usr", tool: "/usr/bin/rustc",
				dirs: []toolDir{{what: "sysroot", path: "/usr", required: true},
					{what: "CARGO_HOME", path: "/ci/cargo", envVar: "CARGO_HOME", hide: cargoCredentialNames},
					{what: "RUSTUP_HOME", path: "/ci/rustup", envVar: "RUSTUP_HOME"},
					{what: "system git configuration", path: "/etc/gitconfig", file: true}},
				env: []string{"CARGO_NET_OFFLINE=true"}, caches: []string{"CARGO_HOME=cargo-home"}}},
		{name: "rust-relative-cargo-home", discover: discoverRust,
			host: fakeHost{path: map[string]string{"rustc": "/usr/bin/rustc"}, env: map[string]string{"CARGO_HOME": "cargo"},
				out: map[string]string{"/usr/bin/rustc --print sysroot": "/usr"}},
			err: `CARGO_HOME="cargo" is not an absolute path`},
		{name: "rust-missing", discover: discoverRust, host: fakeHost{path: map[string]string{"cargo": "/usr/bin/cargo"}}, err: "recipe rust: rustc not found on PATH"},
		{name: "node-with-npm", discover: discoverNode,
			host: fakeHost{path: map[string]string{"node": "/usr/bin/node", "npm": "/usr/bin/npm"},
				out: map[string]string{
					"/usr/bin/node -p process.execPath": "/usr/bin/node\n",
					"/usr/bin/npm root -g":              "/usr/lib/node_modules\n",
					"/usr/bin/npm config get cache":     "/h/.npm\n",
				}},
			want: toolchain{recipe: "node", tool: "/usr/bin/node", binDir: "/usr/bin",
				dirs: []toolDir{{what: "node's directory", path: "/usr/bin", required: true},
					{what: "npm global root", path: "/usr/lib/node_modules"},
					{what: "npm cache", path: "/h/.npm", envVar: "npm_config_cache"}},
				env:    []string{"npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false"},
				caches: []string{"npm_config_cache=npm"}},
			asked: map[string][]string{"/usr/bin/npm config get cache": {"npm_config_update_notifier=false", "npm_config_offline=true", "npm_config_logs_max=0"}}},
		{name: "node-without-npm", discover: discoverNode,
			host: fakeHost{path: map[string]string{"node": "/opt/node/bin/node"},
				out: map[string]string{"/opt/node/bin/node -p process.execPath": "/opt/node/bin/node"}},
			want: toolchain{recipe: "node", version: "without npm", tool: "/opt/node/bin/node", binDir: "/opt/node/bin",
				dirs: []toolDir{{what: "node's directory", path: "/opt/node/bin", required: true}},
				env:  []string{"npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false"}}},
		{name: "node-missing", discover: discoverNode, host: fakeHost{path: map[string]string{"npm": "/usr/bin/npm"}}, err: "recipe node: node not found on PATH"},
		{name: "python", discover: discoverPython,
			host: fakeHost{path: map[string]string{"python3": "/v/bin/python3"},
				out: map[string]string{"/v/bin/python3 -I -c " + pythonScript: `{"executable": "/v/bin/python3", "version": "3.11.2", "prefix": "/v", "base_prefix": "/usr",
					"exec_prefix": "/v", "base_exec_prefix": "/usr", "stdlib": "/usr/lib/python3.11", "platstdlib": "/v/lib/python3.11",
					"purelib": "/v/lib/python3.11/site-packages", "platlib": "/v/lib/python3.11/site-packages"}`}},
			want: toolchain{recipe: "python", version: "Python 3.11.2", tool: "/v/bin/python3", binDir: "/v/bin",
				dirs: []toolDir{{what: "prefix", path: "/v", required: true}, {what: "base_prefix", path: "/usr"},
					{what: "exec_prefix", path: "/v"}, {what: "base_exec_prefix", path: "/usr"},
					{what: "stdlib", path: "/usr/lib/python3.11", required: true}, {what: "platstdlib", path: "/v/lib/python3.11"},
					{what: "purelib", path: "/v/lib/python3.11/site-packages"}, {what: "platlib", path: "/v/lib/python3.11/site-packages"}},
				env: []string{"PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"}, caches: []string{"PIP_CACHE_DIR=pip"}}},
		{name: "python-garbage", discover: discoverPython,
			host: fakeHost{path: map[string]string{"python3": "/usr/bin/python3"}, out: map[string]string{"/usr/bin/python3 -I -c " + pythonScript: "Python 2"}},
			err:  `python3 answered "Python 2"`},
		{name: "python-missing", discover: discoverPython, host: fakeHost{}, err: "recipe python: python3 not found on PATH"},
		{name: "c-gcc", discover: discoverC,
			host: fakeHost{path: map[string]string{"gcc": "/usr/bin/gcc", "cc": "/usr/bin/cc"},
				out: map[string]string{"/usr/bin/gcc -print-search-dirs": "install: /usr/lib/\nprograms: =/usr/bin/:/nonexistent/x:/usr/lib/../bin/:relative\nlibraries: =/usr/lib/:/usr/share/\nother: /etc/\n"}},
			want: toolchain{recipe: "c", tool: "/usr/bin/gcc",
				dirs: []toolDir{{what: "search dir", path: realpath(t, "/usr/lib")}, {what: "search dir", path: realpath(t, "/usr/bin")}, {what: "search dir", path: realpath(t, "/usr/share")}}}},
		{name: "c-cc-only", discover: discoverC,
			host: fakeHost{path: map[string]string{"cc": "/usr/bin/cc"}, out: map[string]string{"/usr/bin/cc -print-search-dirs": ""}},
			want: toolchain{recipe: "c", tool: "/usr/bin/cc"}},
		{name: "c-missing", discover: discoverC, host: fakeHost{}, err: "recipe c: neither gcc nor cc found on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.host.host()
			got, err := tt.discover(h)
			if tt.err != "" {
				if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want ErrUnavailable containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tt.want) {
				t.Errorf("got  %+v\nwant %+v", got, tt.want)
			}
			for cmd, env := range tt.asked {
				if fmt.Sprint(tt.host.asked[cmd]) != fmt.Sprint(env) {
					t.Errorf("%s asked with env %v, want %v", cmd, tt.host.asked[cmd], env)
				}
			}
		})
	}
}

func realpath(t *testing.T, p string) string {
	t.Helper()
	r, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A recipe asks its toolchain once per process; the answer, an error
// included, is what every later Lookup gets.
func TestRecipeResolvedOnce(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	r := &recipe{name: "x", discover: func(*toolHost) (toolchain, error) {
		calls++
		return toolchain{recipe: "x", dirs: []toolDir{{what: "dir", path: dir, required: true}}}, nil
	}}
	h := (&fakeHost{home: "/h"}).host()
	p1, err1 := r.resolve(h)
	p2, err2 := r.resolve(h)
	if err1 != nil || err2 != nil || calls != 1 || p1.Digest() != p2.Digest() {
		t.Fatalf("calls %d, errors %v %v, digests %s %s", calls, err1, err2, p1.Digest(), p2.Digest())
	}
	calls = 0
	bad := &recipe{name: "y", discover: func(*toolHost) (toolchain, error) {
		calls++
		return toolchain{}, unavailable("y", "y not found on PATH")
	}}
	_, err1 = bad.resolve(h)
	_, err2 = bad.resolve(h)
	if calls != 1 || err1 == nil || err1 != err2 {
		t.Fatalf("calls %d, errors %v %v", calls, err1, err2)
	}
}

// Recipes are built-ins: listed, resolvable by name, and their names are
// not available to profile files; a recipe whose toolchain is missing is an
// error naming it, from ResolveProfile and from the engine alike.
func TestRecipeBuiltins(t *testing.T) {
	names := Names()
	for _, n := range []string{"default", "go", "rust", "node", "python", "c"} {
		if !contains(names, n) || !isBuiltin(n) {
			t.Errorf("%s: not a built-in (Names %v)", n, names)
		}
	}
	if _, err := parseProfile([]byte(`name = "go"`), "x.toml"); err == nil || !strings.Contains(err.Error(), "built-in") {
		t.Errorf("a profile file named go: %v", err)
	}
	eng, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(Profile{Name: "rust", Tier: TierSandboxed}); err == nil {
		t.Error("a profile registered as rust")
	}

	// Swap the go recipe for one whose toolchain is missing.
	saved := recipes["go"]
	defer func() { recipes["go"] = saved }()
	missing := &recipe{name: "go", discover: discoverGo}
	recipes["go"] = missing
	// Cached as this process's answer, which every Lookup then gets.
	_, _ = missing.resolve((&fakeHost{}).host())
	for what, f := range map[string]func() error{
		"ResolveProfile": func() error { _, err := ResolveProfile("go"); return err },
		"Lookup":         func() error { _, err := lookupProfile("go"); return err },
		"Mint":           func() error { _, err := eng.Mint("go", "test", 0); return err },
	} {
		if err := f(); !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), "recipe go: go not found on PATH") {
			t.Errorf("%s(go) = %v, want ErrUnavailable naming the missing go", what, err)
		}
	}
}

// A directory inside programRoots is not granted again, so every one of
// them must really be granted to every run.
func TestProgramRootsAreGranted(t *testing.T) {
	def := landlock.DefaultSystemReadExec()
	for _, r := range programRoots {
		if !contains(def, r) {
			t.Errorf("%s is not in landlock.DefaultSystemReadExec() %v", r, def)
		}
	}
}
