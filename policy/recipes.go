package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/internal/toolhost"
	"github.com/confine-sandbox/confine/spec"
)

// Recipes are built-in profiles for one toolchain each: "go", "rust",
// "node", "python" and "c". Lookup (and so ResolveProfile and --profile)
// resolves one by asking its toolchain where it lives, once per process;
// the answer is cached with the error, if any, so every Lookup in a
// process (ResolveProfile, Mint, Authorize) sees the same profile and
// digest.
//
// A recipe grants the toolchain and its caches read+exec (never the home
// directory or an ancestor of it: resolving fails instead), and sets
// environment variables that keep the build offline and point the tool at
// what was granted. It grants nothing writable: build outputs go to the
// work directory (cargo's target/ too), and a cache that must be writable
// (GOCACHE, pip's cache, cargo's home, npm's cache) is one of
// Profile.Caches, a directory of the run's own that the launcher keeps,
// with the caller's value as the fallback where a recipe sets one. What a
// recipe asks, grants and sets:
//
//	go      go env -json GOROOT GOMODCACHE GOVERSION
//	        grants GOROOT and GOMODCACHE (read-only: a pre-filled cache
//	        builds offline)
//	        sets GOFLAGS=-mod=mod GOPROXY=off GOSUMDB=off GOTOOLCHAIN=local
//	        GOMODCACHE=<the cache>
//	        keeps GOCACHE across runs (Profile.Caches), which the launcher
//	        serves, reading the caller's GOCACHE through (GOCACHEPROG)
//	rust    rustc --print sysroot; $CARGO_HOME (default ~/.cargo) and
//	        $RUSTUP_HOME (default ~/.rustup)
//	        grants the sysroot, CARGO_HOME without credentials.toml and
//	        credentials, RUSTUP_HOME, and /etc/gitconfig where it exists
//	        (cargo's libgit2 reads it regardless of GIT_CONFIG_NOSYSTEM)
//	        sets CARGO_NET_OFFLINE=true CARGO_HOME=... RUSTUP_HOME=...
//	        keeps CARGO_HOME across runs (Profile.Caches): the run's own,
//	        reading the caller's registry and git databases through
//	node    node -p process.execPath; npm root -g; npm config get cache
//	        grants node's directory, npm's global root and npm's cache
//	        sets npm_config_offline=true npm_config_cache=<the cache>
//	        npm_config_update_notifier=false npm_config_audit=false
//	        npm_config_fund=false
//	        keeps npm_config_cache across runs (Profile.Caches): the run's
//	        own, a copy of the caller's npm cache made when it is created
//	python  python3 -I -c '<sys and sysconfig as JSON>'
//	        grants prefix, base_prefix, exec prefixes, stdlib, platstdlib,
//	        purelib, platlib
//	        sets PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1
//	        keeps PIP_CACHE_DIR across runs (Profile.Caches)
//	c       gcc -print-search-dirs (cc when there is no gcc)
//	        grants the search dirs outside the system roots, if any
//
// Directories inside the system roots (/usr, /bin, /lib...), which every
// run reads anyway, are not listed again. A cache that does not exist is
// neither granted nor set, so the tool falls back to its default under the
// run's private HOME.
//
// To point a recipe elsewhere, configure the toolchain the usual way in the
// environment confine runs in: GOMODCACHE (or GOPATH), CARGO_HOME,
// RUSTUP_HOME, npm_config_cache or ~/.npmrc, PATH for which go, rustc,
// node, python3 or gcc is used. The discovery commands run in "/" (never in
// the work directory, whose go.mod, rust-toolchain.toml, .npmrc or json.py
// are the untrusted input) with GOTOOLCHAIN=local, RUSTUP_AUTO_INSTALL=0
// and python3 -I, so nothing in a checkout can steer what is granted or
// run code outside the sandbox.
//
// Resolving fails, wrapping spec.ErrUnavailable, when the toolchain is
// missing ("recipe go: go not found on PATH"), when it answers nothing
// usable, when a discovered directory is the home directory or contains
// it, when the program found on PATH lies outside what the recipe grants
// (a pyenv or asdf shim: the run would not find it, or would find another
// one), and when cargo credentials lie in a system root, where they cannot
// be hidden.
var recipes = map[string]*recipe{
	"go":     {name: "go", discover: discoverGo},
	"rust":   {name: "rust", discover: discoverRust},
	"node":   {name: "node", discover: discoverNode},
	"python": {name: "python", discover: discoverPython},
	"c":      {name: "c", discover: discoverC},
}

// recipeNames lists the recipe profiles.
func recipeNames() []string {
	n := make([]string, 0, len(recipes))
	for k := range recipes {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func isRecipe(name string) bool {
	_, ok := recipes[name]
	return ok
}

// recipe is one recipe profile and its cached resolution.
//
// The cache is in memory only. Asking costs a few milliseconds (go, gcc)
// to a quarter of a second (npm) once per confine process, and an on-disk
// cache keyed by the tool's path and mtime would go stale on what else
// decides the answer (GOMODCACHE, CARGO_HOME, ~/.npmrc, which python3 is
// first on PATH) and would be one more file whose content decides what a
// run may read.
type recipe struct {
	name     string
	discover func(*toolHost) (toolchain, error)
}

// resolve discovers the toolchain in this process's environment once per
// process and returns the profile, or the error, every time after.
func (r *recipe) resolve(h *toolHost) (Profile, error) {
	return r.resolveIn(processEnv, h)
}

// resolveIn is resolve in the environment env names (processEnv or a
// digest, see LookupIn), discovered through h the first time.
func (r *recipe) resolveIn(env [32]byte, h *toolHost) (Profile, error) {
	c := cachedResolution(r, env)
	c.once.Do(func() {
		if h == nil {
			c.err = unavailable(r.name, "toolchain discovery is not installed in this program (internal/planner installs it)")
			return
		}
		tc, err := r.discover(h)
		if err != nil {
			c.err = err
			return
		}
		c.prof, c.err = recipeProfile(tc, h.homes())
	})
	return c.prof, c.err
}

// processEnv keys this process's own environment in the recipe cache.
var processEnv [32]byte

// maxEnvResolutions bounds the cache's entries for other environments: a
// server sees a few; one that sees many just discovers again.
const maxEnvResolutions = 64

// resolution is one recipe resolved in one environment.
type resolution struct {
	once sync.Once
	prof Profile
	err  error
}

type resolutionKey struct {
	r   *recipe
	env [32]byte
}

var (
	resolutionsMu sync.Mutex
	resolutions   = map[resolutionKey]*resolution{}
)

// cachedResolution is the cache entry of r in env, made on first use.
func cachedResolution(r *recipe, env [32]byte) *resolution {
	resolutionsMu.Lock()
	defer resolutionsMu.Unlock()
	k := resolutionKey{r, env}
	c, ok := resolutions[k]
	if ok {
		return c
	}
	if env != processEnv && len(resolutions) >= maxEnvResolutions {
		// This process's own resolutions stay: they are once per process.
		maps.DeleteFunc(resolutions, func(k resolutionKey, _ *resolution) bool { return k.env != processEnv })
	}
	c = &resolution{}
	resolutions[k] = c
	return c
}

// lookupRecipe resolves a recipe against the real host.
func lookupRecipe(name string) (Profile, bool, error) {
	r, ok := recipes[name]
	if !ok {
		return Profile{}, false, nil
	}
	p, err := r.resolve(processHost())
	return p, true, err
}

// toolchain is what discovery found, before it is checked and turned into
// a Profile by recipeProfile.
type toolchain struct {
	recipe  string
	version string
	// tool is the program found on PATH (not resolved); the run finds
	// it on the same PATH, so it must lie in what the recipe grants.
	tool string
	// binDir is the toolchain's own bin directory, for the remedy when
	// tool is a shim; "" if unknown.
	binDir string
	dirs   []toolDir
	// env are fixed NAME=VALUE entries.
	env []string
	// caches are NAME=SUBDIR entries (Profile.Caches).
	caches []string
}

// toolDir is one discovered directory.
type toolDir struct {
	what string // for messages: "GOROOT", "module cache"
	path string
	// required: a missing one fails the recipe; otherwise it is left out
	// (and envVar not set).
	required bool
	// envVar, when set, is set to path in the run when path exists.
	envVar string
	// hide are names directly inside path that hold credentials and must
	// stay unreadable (cargo's credentials.toml).
	hide []string
	// file: path is a single file, not a directory.
	file bool
}

// programRoots are the system roots every run reads (mirrors
// internal/landlock's systemRoots; a test checks). A discovered directory
// inside one needs no grant of its own.
var programRoots = []string{"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"}

// cargoCredentialNames are the files in a cargo home that hold registry
// tokens.
var cargoCredentialNames = []string{"credentials.toml", "credentials"}

func unavailable(recipe, format string, a ...any) error {
	return fmt.Errorf("%w: recipe %s: %s", spec.ErrUnavailable, recipe, fmt.Sprintf(format, a...))
}

// recipeProfile checks a discovery and turns it into a Profile. homes are
// the caller's home directories, which no grant may be or contain.
func recipeProfile(tc toolchain, homes []string) (Profile, error) {
	var realHomes []string
	for _, h := range homes {
		if h == "" || !filepath.IsAbs(h) {
			continue
		}
		realHomes = append(realHomes, filepath.Clean(h))
		if r, err := filepath.EvalSymlinks(h); err == nil {
			realHomes = append(realHomes, r)
		}
	}
	env := append([]string(nil), tc.env...)
	var dirs, secrets, notes []string
	for _, d := range tc.dirs {
		if d.path == "" || !filepath.IsAbs(d.path) {
			if d.required {
				return Profile{}, unavailable(tc.recipe, "%s %q is not an absolute path", d.what, d.path)
			}
			continue
		}
		real, err := filepath.EvalSymlinks(d.path)
		if err == nil {
			var st os.FileInfo
			if st, err = os.Stat(real); err == nil && st.IsDir() == d.file {
				err = errors.New("not a directory")
				if d.file {
					err = errors.New("not a file")
				}
			}
		}
		if err != nil {
			if d.required {
				return Profile{}, unavailable(tc.recipe, "%s %s: %v", d.what, d.path, err)
			}
			notes = append(notes, fmt.Sprintf("%s %s absent, not granted", d.what, d.path))
			continue
		}
		if err := checkPathSyntax(real); err != nil {
			return Profile{}, unavailable(tc.recipe, "%s %s: %v", d.what, d.path, err)
		}
		for _, h := range realHomes {
			if spec.Within(h, real) {
				return Profile{}, unavailable(tc.recipe, "%s %s is or contains the home directory %s, which a recipe never grants", d.what, d.path, h)
			}
		}
		for _, s := range presentSecrets(real, d.hide) {
			if under(s, programRoots) {
				return Profile{}, unavailable(tc.recipe, "%s holds %s inside a system root every run reads, where confine cannot hide it; move it out", d.what, s)
			}
			secrets = append(secrets, s)
		}
		if d.envVar != "" {
			env = append(env, d.envVar+"="+filepath.Clean(d.path))
		}
		if !under(real, programRoots) {
			dirs = append(dirs, real)
		}
	}
	grants, err := grantAround(dirs, secrets)
	if err != nil {
		return Profile{}, unavailable(tc.recipe, "%v", err)
	}
	if tc.tool != "" {
		if err := checkTool(tc, grants); err != nil {
			return Profile{}, err
		}
	}
	set, err := SanitizeEnv(env, nil)
	if err != nil {
		return Profile{}, unavailable(tc.recipe, "%v", err)
	}
	for _, kv := range set {
		name, val, _ := strings.Cut(kv, "=")
		if !isPathListVar(name) {
			continue
		}
		for _, c := range pathListComponents(name, val) {
			if err := checkPathSyntax(c); err != nil {
				return Profile{}, unavailable(tc.recipe, "%s: %v", name, err)
			}
		}
	}
	desc := tc.recipe + " recipe"
	if tc.version != "" {
		desc += ": " + tc.version
	}
	if tc.tool != "" {
		desc += " (" + tc.tool + ")"
	}
	if len(notes) > 0 {
		desc += "; " + strings.Join(notes, "; ")
	}
	return Profile{
		Name:        tc.recipe,
		Tier:        TierSandboxed,
		ReadExec:    grants,
		Devices:     append([]string(nil), DefaultDevices()...),
		Description: desc,
		Env:         EnvPolicy{Set: set},
		Network:     spec.DenyAll,
		Caches:      append([]string(nil), tc.caches...),
	}, nil
}

// presentSecrets lists the names directly inside root that exist, and the
// targets inside root of those that are symlinks.
func presentSecrets(root string, names []string) []string {
	var out []string
	for _, n := range names {
		p := filepath.Join(root, n)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		out = append(out, p)
		if t, err := filepath.EvalSymlinks(p); err == nil && t != p && spec.Within(t, root) {
			out = append(out, t)
		}
	}
	return out
}

// grantAround returns the read grants for dirs (canonical, outside the
// system roots) such that no secret is covered: a directory inside another
// is dropped, and one holding a secret is granted whole only when
// SplitReadGrant, which every run applies to its read roots, hides that
// secret anyway (the run then reports it hidden); otherwise its entries
// except the secrets are granted.
func grantAround(dirs, secrets []string) ([]string, error) {
	sort.Slice(dirs, func(i, j int) bool {
		return len(dirs[i]) < len(dirs[j]) || len(dirs[i]) == len(dirs[j]) && dirs[i] < dirs[j]
	})
	var top []string
	for _, d := range dirs {
		if !under(d, top) {
			top = append(top, d)
		}
	}
	var grants []string
	for _, d := range top {
		var in []string
		for _, s := range secrets {
			if spec.Within(s, d) {
				in = append(in, s)
			}
		}
		if len(in) == 0 {
			grants = append(grants, d)
			continue
		}
		_, excluded, err := credpath.SplitReadGrant(d)
		if err != nil {
			return nil, err
		}
		hidden := true
		for _, s := range in {
			hidden = hidden && contains(excluded, s)
		}
		if hidden {
			grants = append(grants, d)
			continue
		}
		sort.Strings(in)
		sub, err := credpath.Split(d, in)
		if err != nil {
			return nil, fmt.Errorf("re-deny credentials under %s: %w", d, err)
		}
		grants = append(grants, sub...)
	}
	sort.Strings(grants)
	return grants, nil
}

// checkTool refuses a recipe whose program, as found on PATH, the run
// would not find or not run: its directory (a PATH component the run
// keeps only inside its read roots) and the file it resolves to must lie
// in the system roots or the recipe's grants.
func checkTool(tc toolchain, grants []string) error {
	roots := append(append([]string(nil), programRoots...), grants...)
	dir := filepath.Dir(tc.tool)
	real, err := filepath.EvalSymlinks(tc.tool)
	if err != nil {
		return unavailable(tc.recipe, "%s: %v", tc.tool, err)
	}
	if checkPathComponent(dir, roots, nil) == nil && under(real, roots) {
		return nil
	}
	granted := strings.Join(grants, ", ")
	if granted == "" {
		granted = "only the system roots"
	}
	found := tc.tool
	if real != tc.tool {
		found += " -> " + real
	}
	fix := "the toolchain's own bin directory"
	if tc.binDir != "" {
		fix = tc.binDir
	}
	return unavailable(tc.recipe, "%s on PATH is %s, outside what the recipe grants (%s), so the run would not find it (a shim or wrapper?); put %s first on PATH",
		filepath.Base(tc.tool), found, granted, fix)
}

// toolHost is what discovery asks; tests replace it.
type toolHost struct {
	lookPath func(string) (string, error)
	// run runs prog (a path) with args and the extra environment
	// entries, and returns its standard output.
	run    func(extraEnv []string, prog string, args ...string) ([]byte, error)
	getenv func(string) string
	// home is the caller's home directory as the tools see it.
	home func() string
	// passwdHome is the user database's home directory, if different.
	passwdHome func() string
}

func (h *toolHost) homes() []string {
	return []string{h.home(), h.passwdHome()}
}

// processHost is the installed host (toolhost) in this process's
// environment, or nil.
func processHost() *toolHost { return fromHost(toolhost.Process()) }

// hostIn is the installed host in environ, or nil.
func hostIn(environ []string) *toolHost { return fromHost(toolhost.In(environ)) }

func fromHost(h *toolhost.Host) *toolHost {
	if h == nil {
		return nil
	}
	return &toolHost{lookPath: h.LookPath, run: h.Run, getenv: h.Getenv, home: h.Home, passwdHome: h.PasswdHome}
}

// find looks prog up on PATH, or fails the recipe.
func (h *toolHost) find(recipe, prog string) (string, error) {
	p, err := h.lookPath(prog)
	if err != nil {
		return "", unavailable(recipe, "%s not found on PATH", prog)
	}
	if !filepath.IsAbs(p) {
		return "", unavailable(recipe, "%s found at %s, a relative PATH entry; use absolute PATH entries", prog, p)
	}
	return filepath.Clean(p), nil
}

// ask runs a discovery command and returns its trimmed output.
func (h *toolHost) ask(recipe string, extraEnv []string, prog string, args ...string) (string, error) {
	out, err := h.run(extraEnv, prog, args...)
	if err != nil {
		return "", unavailable(recipe, "asking the toolchain: %v", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// userDir is $NAME when set to an absolute path, else home/def.
func (h *toolHost) userDir(recipe, name, def string) (string, error) {
	if v := h.getenv(name); v != "" {
		if !filepath.IsAbs(v) {
			return "", unavailable(recipe, "%s=%q is not an absolute path", name, v)
		}
		return filepath.Clean(v), nil
	}
	home := h.home()
	if home == "" {
		return "", nil
	}
	return filepath.Join(home, def), nil
}

func discoverGo(h *toolHost) (toolchain, error) {
	const r = "go"
	goBin, err := h.find(r, "go")
	if err != nil {
		return toolchain{}, err
	}
	// GOTOOLCHAIN=local: report the toolchain the run will use, and never
	// download or switch to another one here.
	out, err := h.ask(r, []string{"GOTOOLCHAIN=local"}, goBin, "env", "-json", "GOROOT", "GOMODCACHE", "GOVERSION")
	if err != nil {
		return toolchain{}, err
	}
	var v struct{ GOROOT, GOMODCACHE, GOVERSION string }
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return toolchain{}, unavailable(r, "go env -json: %v", err)
	}
	if v.GOROOT == "" {
		return toolchain{}, unavailable(r, "go env reports no GOROOT")
	}
	return toolchain{
		recipe:  r,
		version: v.GOVERSION,
		tool:    goBin,
		binDir:  filepath.Join(v.GOROOT, "bin"),
		dirs: []toolDir{
			{what: "GOROOT", path: v.GOROOT, required: true},
			{what: "module cache", path: v.GOMODCACHE, envVar: "GOMODCACHE"},
		},
		// GOSUMDB=off: with GOPROXY=off a sum the go.sum lacks could only
		// be looked up over the network, which the run does not have. The
		// modules come from the read-only cache, whose content was
		// checked against the checksum database (or the go.sum of
		// whoever filled it) when it was downloaded, and go.sum entries
		// present are still verified.
		env: []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local"},
		// The build cache (compiled packages, test results), kept across
		// runs: without it every run compiles everything again.
		caches: []string{"GOCACHE=go-build"},
	}, nil
}

func discoverRust(h *toolHost) (toolchain, error) {
	const r = "rust"
	rustc, err := h.find(r, "rustc")
	if err != nil {
		return toolchain{}, err
	}
	sysroot, err := h.ask(r, []string{"RUSTUP_AUTO_INSTALL=0"}, rustc, "--print", "sysroot")
	if err != nil {
		return toolchain{}, err
	}
	cargoHome, err := h.userDir(r, "CARGO_HOME", ".cargo")
	if err != nil {
		return toolchain{}, err
	}
	rustupHome, err := h.userDir(r, "RUSTUP_HOME", ".rustup")
	if err != nil {
		return toolchain{}, err
	}
	return toolchain{
		recipe:  r,
		version: "sysroot " + sysroot,
		tool:    rustc,
		dirs: []toolDir{
			{what: "sysroot", path: sysroot, required: true},
			{what: "CARGO_HOME", path: cargoHome, envVar: "CARGO_HOME", hide: cargoCredentialNames},
			{what: "RUSTUP_HOME", path: rustupHome, envVar: "RUSTUP_HOME"},
			// cargo's libgit2 reads the system git configuration and,
			// unlike git (GIT_CONFIG_NOSYSTEM), cannot be told not to: an
			// existing but unreadable one (the core backend, where
			// Landlock answers EACCES rather than the new root's ENOENT)
			// fails every git dependency's database as unopenable.
			{what: "system git configuration", path: "/etc/gitconfig", file: true},
		},
		env: []string{"CARGO_NET_OFFLINE=true"},
		// A cargo home of the run's own, kept across runs, that reads the
		// caller's registry and git databases through (read-only): cargo
		// writes its extracted sources, checkouts and locks there, never
		// into the caller's. The build artefacts stay in target/ in the
		// work directory, where users look for them and which persists.
		caches: []string{"CARGO_HOME=cargo-home"},
	}, nil
}

func discoverNode(h *toolHost) (toolchain, error) {
	const r = "node"
	node, err := h.find(r, "node")
	if err != nil {
		return toolchain{}, err
	}
	exe, err := h.ask(r, nil, node, "-p", "process.execPath")
	if err != nil {
		return toolchain{}, err
	}
	tc := toolchain{
		recipe: r,
		tool:   node,
		binDir: filepath.Dir(exe),
		dirs:   []toolDir{{what: "node's directory", path: filepath.Dir(exe), required: true}},
		env: []string{"npm_config_offline=true", "npm_config_update_notifier=false",
			"npm_config_audit=false", "npm_config_fund=false"},
	}
	if !filepath.IsAbs(exe) {
		return toolchain{}, unavailable(r, "node reports execPath %q", exe)
	}
	npm, err := h.lookPath("npm")
	if err != nil || !filepath.IsAbs(npm) {
		// node without npm (Debian's nodejs package alone) still runs.
		tc.version = "without npm"
		return tc, nil
	}
	// logs_max=0: asking writes no debug log into the caller's cache.
	quiet := []string{"npm_config_update_notifier=false", "npm_config_offline=true", "npm_config_logs_max=0"}
	root, err := h.ask(r, quiet, npm, "root", "-g")
	if err != nil {
		return toolchain{}, err
	}
	cache, err := h.ask(r, quiet, npm, "config", "get", "cache")
	if err != nil {
		return toolchain{}, err
	}
	tc.dirs = append(tc.dirs,
		toolDir{what: "npm global root", path: root},
		toolDir{what: "npm cache", path: cache, envVar: "npm_config_cache"})
	// npm's cache of the run's own, kept across runs: a copy of the
	// caller's, made when it is created (npm reads one cache only, and
	// writes it even when installing offline).
	tc.caches = []string{"npm_config_cache=npm"}
	return tc, nil
}

// pythonScript prints what the python recipe grants. It runs with -I
// (isolated: no PYTHON* variables, no user site, no script or current
// directory on sys.path).
const pythonScript = `import json, sys, sysconfig
p = sysconfig.get_paths()
print(json.dumps({"executable": sys.executable, "version": sys.version.split()[0],
  "prefix": sys.prefix, "base_prefix": sys.base_prefix,
  "exec_prefix": sys.exec_prefix, "base_exec_prefix": sys.base_exec_prefix,
  "stdlib": p.get("stdlib", ""), "platstdlib": p.get("platstdlib", ""),
  "purelib": p.get("purelib", ""), "platlib": p.get("platlib", "")}))`

func discoverPython(h *toolHost) (toolchain, error) {
	const r = "python"
	py, err := h.find(r, "python3")
	if err != nil {
		return toolchain{}, err
	}
	out, err := h.ask(r, nil, py, "-I", "-c", pythonScript)
	if err != nil {
		return toolchain{}, err
	}
	var v map[string]string
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return toolchain{}, unavailable(r, "python3 answered %q: %v", toolhost.OneLine(out), err)
	}
	tc := toolchain{
		recipe:  r,
		version: "Python " + v["version"],
		tool:    py,
		binDir:  filepath.Dir(v["executable"]),
		env:     []string{"PIP_NO_INDEX=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"},
		// pip's cache (wheels it built), kept across runs.
		caches: []string{"PIP_CACHE_DIR=pip"},
	}
	for _, k := range []string{"prefix", "base_prefix", "exec_prefix", "base_exec_prefix", "stdlib", "platstdlib", "purelib", "platlib"} {
		req := k == "prefix" || k == "stdlib"
		tc.dirs = append(tc.dirs, toolDir{what: k, path: v[k], required: req})
	}
	return tc, nil
}

func discoverC(h *toolHost) (toolchain, error) {
	const r = "c"
	cc, err := h.lookPath("gcc")
	if err != nil {
		if cc, err = h.find(r, "cc"); err != nil {
			return toolchain{}, unavailable(r, "neither gcc nor cc found on PATH")
		}
	}
	if !filepath.IsAbs(cc) {
		return toolchain{}, unavailable(r, "%s is a relative PATH entry; use absolute PATH entries", cc)
	}
	out, err := h.ask(r, nil, cc, "-print-search-dirs")
	if err != nil {
		return toolchain{}, err
	}
	tc := toolchain{recipe: r, tool: filepath.Clean(cc)}
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			continue
		}
		switch key {
		case "install", "programs", "libraries":
		default:
			continue
		}
		for _, d := range strings.Split(strings.TrimPrefix(val, "="), ":") {
			if d = strings.TrimSpace(d); d == "" || !filepath.IsAbs(d) {
				continue
			}
			// ".." after a symlink means the link's parent: resolve
			// before cleaning.
			if real, err := filepath.EvalSymlinks(d); err == nil {
				d = real
			} else {
				continue // most listed directories do not exist
			}
			if !seen[d] {
				seen[d] = true
				tc.dirs = append(tc.dirs, toolDir{what: "search dir", path: d})
			}
		}
	}
	return tc, nil
}
