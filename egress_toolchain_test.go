//go:build linux

package confine_test

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// registry serves, over HTTPS on loopback as registry.test, a Go module
// proxy (example.test/hello v1.0.0) and, under /git/, git's smart HTTP
// protocol for one repository. A profile allows registry.test only.
type registry struct {
	port   int
	caFile string
	caDir  string
	cap    *policy.Cap
}

func newRegistry(t *testing.T) *registry {
	t.Helper()
	cert, _, caPEM, err := testutil.TLSCertificate("registry.test")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mod := "module example.test/hello\n\ngo 1.21\n"
	var zb bytes.Buffer
	zw := zip.NewWriter(&zb)
	for name, body := range map[string]string{
		"example.test/hello@v1.0.0/go.mod":   mod,
		"example.test/hello@v1.0.0/hello.go": "package hello\n\nconst Hello = \"hello\"\n",
	} {
		w, err := zw.Create(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(body))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{
		"/example.test/hello/@v/list":        []byte("v1.0.0\n"),
		"/example.test/hello/@v/v1.0.0.info": []byte(`{"Version":"v1.0.0","Time":"2024-01-01T00:00:00Z"}`),
		"/example.test/hello/@v/v1.0.0.mod":  []byte(mod),
		"/example.test/hello/@v/v1.0.0.zip":  zb.Bytes(),
	}
	addNPM(t, files)
	addPyPI(t, files)
	addCrates(t, files)
	var port int
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, ok := files[r.URL.Path]
		b = bytes.ReplaceAll(b, []byte("$PORT"), []byte(strconv.Itoa(port)))
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	})
	if gitDir := gitRepo(t); gitDir != "" {
		mux.Handle("/git/", &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend", Root: "/git",
			Env: []string{"GIT_PROJECT_ROOT=" + gitDir, "GIT_HTTP_EXPORT_ALL=1"}})
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	port = srv.Listener.Addr().(*net.TCPAddr).Port
	r := &registry{port: port, caDir: worktree(t)}
	if err := os.Chmod(r.caDir, 0o755); err != nil {
		t.Fatal(err)
	}
	r.caFile = filepath.Join(r.caDir, "ca.pem")
	if err := os.WriteFile(r.caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	prof, err := profileFromTOML(t, []byte(fmt.Sprintf(`name = "registry-test"
network = "allowlist"
[allowlist]
hosts = ["registry.test:%d"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"registry.test" = ["127.0.0.1"]
`, r.port)), "registry-test.toml")
	if err != nil {
		t.Fatal(err)
	}
	e, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Register(prof); err != nil {
		t.Fatal(err)
	}
	if r.cap, err = e.Mint(prof.Name, "test", 0); err != nil {
		t.Fatal(err)
	}
	return r
}

// gitRepo makes a bare repository "repo.git" with one commit; "" when
// git or its http backend is missing.
func gitRepo(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/usr/lib/git-core/git-http-backend"); err != nil {
		return ""
	}
	root := t.TempDir()
	src := filepath.Join(root, "src")
	env := append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+root)
	for _, args := range [][]string{
		{"init", "-q", "-b", "main", src},
		{"-C", src, "commit", "-q", "--allow-empty", "-m", "first"},
		{"clone", "-q", "--bare", src, filepath.Join(root, "repo.git")},
	} {
		c := exec.Command("git", args...)
		c.Env = env
		if out, err := c.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return root
}

func (r *registry) run(t *testing.T, env []string, ro []string, prog string, args ...string) (spec.CommandResult, string) {
	t.Helper()
	return r.runIn(t, worktree(t), env, ro, prog, args...)
}

func (r *registry) runIn(t *testing.T, wt string, env []string, ro []string, prog string, args ...string) (spec.CommandResult, string) {
	t.Helper()
	s := spec.CommandSpec{Program: prog, Args: args, Worktree: wt, ReadOnly: append([]string{r.caDir}, ro...),
		Env: append([]string{"LANG=C.UTF-8", "SSL_CERT_FILE=" + r.caFile}, env...), TaskID: "toolchain"}
	for i := range s.Env {
		s.Env[i] = strings.ReplaceAll(s.Env[i], "$WT", wt)
	}
	for i := range s.Args {
		s.Args[i] = strings.ReplaceAll(s.Args[i], "$WT", wt)
	}
	logPath := filepath.Join(t.TempDir(), "events.jsonl")
	l := &confine.Launcher{EventLog: logPath}
	res, err := l.RunCommand(context.Background(), r.cap, s)
	if err != nil {
		t.Fatalf("%s %v: %v", prog, args, err)
	}
	// The event log holds the same records.
	logged, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Connections []spec.Connection `json:"connections"`
	}
	if err := json.Unmarshal(logged, &ev); err != nil || len(ev.Connections) != len(res.Connections) {
		t.Fatalf("event log: %v, %d records, the result has %d", err, len(ev.Connections), len(res.Connections))
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s %v: exit %d\nstdout: %s\nstderr: %s\nconnections: %+v", prog, args, res.ExitCode, res.Stdout.Head, res.Stderr.Head, res.Connections)
	}
	var allowed int
	for _, c := range res.Connections {
		if c.Verdict == spec.VerdictAllowed && c.Domain == "registry.test" && c.BytesIn > 0 && c.PID > 0 && c.TaskID == "toolchain" {
			allowed++
		}
	}
	if allowed == 0 {
		t.Fatalf("%s: no allowed connection recorded: %+v", prog, res.Connections)
	}
	return res, wt
}

// TestEgressGoModDownload: `go mod download` through the proxy, from a
// module proxy on loopback.
func TestEgressGoModDownload(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("go is not installed: %v", err)
	}
	goroot, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Skipf("go env GOROOT: %v", err)
	}
	r := newRegistry(t)
	gr := strings.TrimSpace(string(goroot))
	res, wt := r.run(t, []string{"GOPROXY=https://registry.test:" + strconv.Itoa(r.port), "GOSUMDB=off", "GOTOOLCHAIN=local",
		"GOFLAGS=-mod=mod", "GOMODCACHE=$WT/modcache", "GOCACHE=$WT/cache", "PATH=" + gr + "/bin:/usr/bin:/bin"},
		[]string{gr}, filepath.Join(gr, "bin", "go"), "mod", "download", "-x", "example.test/hello@v1.0.0")
	if _, err := os.Stat(filepath.Join(wt, "modcache/example.test/hello@v1.0.0/hello.go")); err != nil {
		t.Fatalf("module not in the cache: %v\n%s", err, res.Stderr.Head)
	}
}

// TestEgressGitClone: `git clone` over https through the proxy.
func TestEgressGitClone(t *testing.T) {
	if _, err := os.Stat("/usr/lib/git-core/git-http-backend"); err != nil {
		t.Skipf("not applicable on this host: no git-http-backend: %v", err)
	}
	r := newRegistry(t)
	_, wt := r.run(t, nil, nil, "/usr/bin/git", "-c", "http.sslCAInfo="+r.caFile, "clone", "-q",
		"https://registry.test:"+strconv.Itoa(r.port)+"/git/repo.git", "out")
	if _, err := os.Stat(filepath.Join(wt, "out", ".git")); err != nil {
		t.Fatalf("no clone: %v", err)
	}
}

// addNPM adds the package hello-pkg 1.0.0 (packument and tarball).
func addNPM(t *testing.T, files map[string][]byte) {
	var tb bytes.Buffer
	gz := gzip.NewWriter(&tb)
	tw := tar.NewWriter(gz)
	for name, body := range map[string]string{
		"package/package.json": `{"name":"hello-pkg","version":"1.0.0","main":"index.js"}`,
		"package/index.js":     "module.exports = 'hello';\n",
	} {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(body))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha512.Sum512(tb.Bytes())
	files["/hello-pkg/-/hello-pkg-1.0.0.tgz"] = tb.Bytes()
	files["/hello-pkg"] = []byte(`{"name":"hello-pkg","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":{"name":"hello-pkg","version":"1.0.0",` +
		`"dist":{"tarball":"https://registry.test:$PORT/hello-pkg/-/hello-pkg-1.0.0.tgz","integrity":"sha512-` + base64.StdEncoding.EncodeToString(sum[:]) + `"}}}}`)
}

// addPyPI adds the distribution hello-pkg 1.0.0 (a pure wheel) to a
// simple index.
func addPyPI(t *testing.T, files map[string][]byte) {
	var wb bytes.Buffer
	zw := zip.NewWriter(&wb)
	for _, f := range [][2]string{
		{"hello_pkg/__init__.py", "HELLO = 'hello'\n"},
		{"hello_pkg-1.0.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: hello-pkg\nVersion: 1.0.0\n"},
		{"hello_pkg-1.0.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: confine-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"hello_pkg-1.0.0.dist-info/RECORD", "hello_pkg/__init__.py,,\nhello_pkg-1.0.0.dist-info/METADATA,,\nhello_pkg-1.0.0.dist-info/WHEEL,,\nhello_pkg-1.0.0.dist-info/RECORD,,\n"},
	} {
		w, err := zw.Create(f[0])
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f[1]))
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(wb.Bytes())
	const whl = "hello_pkg-1.0.0-py3-none-any.whl"
	files["/simple/hello-pkg/"] = []byte(`<!DOCTYPE html><html><body><a href="/files/` + whl + `#sha256=` + hex.EncodeToString(sum[:]) + `">` + whl + `</a></body></html>`)
	files["/files/"+whl] = wb.Bytes()
}

// TestEgressNPMInstall: `npm install` from a registry on loopback.
func TestEgressNPMInstall(t *testing.T) {
	if _, err := os.Stat("/usr/bin/npm"); err != nil {
		t.Skipf("not applicable on this host: no /usr/bin/npm: %v", err)
	}
	r := newRegistry(t)
	_, wt := r.run(t, []string{"npm_config_registry=https://registry.test:" + strconv.Itoa(r.port) + "/", "npm_config_cafile=" + r.caFile,
		"npm_config_cache=$WT/.npm", "npm_config_update_notifier=false", "npm_config_audit=false", "npm_config_fund=false", "PATH=/usr/bin:/bin"},
		nil, "/usr/bin/npm", "install", "--no-save", "hello-pkg")
	if _, err := os.Stat(filepath.Join(wt, "node_modules/hello-pkg/index.js")); err != nil {
		t.Fatalf("not installed: %v", err)
	}
}

// TestEgressPipInstall: `pip install` from a simple index on loopback.
func TestEgressPipInstall(t *testing.T) {
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-m", "pip", "--version").Run(); err != nil {
		t.Skipf("not applicable on this host: no pip for %s: %v", py, err)
	}
	r := newRegistry(t)
	_, wt := r.run(t, []string{"PIP_INDEX_URL=https://registry.test:" + strconv.Itoa(r.port) + "/simple/", "PIP_CERT=" + r.caFile,
		"PIP_NO_CACHE_DIR=1", "PIP_DISABLE_PIP_VERSION_CHECK=1"},
		nil, py, "-m", "pip", "install", "--no-deps", "--target", "$WT/lib", "hello-pkg")
	if _, err := os.Stat(filepath.Join(wt, "lib/hello_pkg/__init__.py")); err != nil {
		t.Fatalf("not installed: %v", err)
	}
}

// addCrates adds the crate hello 1.0.0 to a sparse cargo registry.
func addCrates(t *testing.T, files map[string][]byte) {
	var tb bytes.Buffer
	gz := gzip.NewWriter(&tb)
	tw := tar.NewWriter(gz)
	for _, f := range [][2]string{
		{"hello-1.0.0/Cargo.toml", "[package]\nname = \"hello\"\nversion = \"1.0.0\"\nedition = \"2021\"\n"},
		{"hello-1.0.0/src/lib.rs", "pub const HELLO: &str = \"hello\";\n"},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f[1]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tb.Bytes())
	files["/index/config.json"] = []byte(`{"dl":"https://registry.test:$PORT/crates/{crate}/{version}/download"}`)
	files["/index/he/ll/hello"] = []byte(`{"name":"hello","vers":"1.0.0","deps":[],"cksum":"` + hex.EncodeToString(sum[:]) + `","features":{},"yanked":false}` + "\n")
	files["/crates/hello/1.0.0/download"] = tb.Bytes()
}

// TestEgressCargoFetch: `cargo fetch` from a sparse registry on loopback.
func TestEgressCargoFetch(t *testing.T) {
	home, _ := os.UserHomeDir()
	tc := filepath.Join(home, ".rustup/toolchains/stable-"+map[string]string{"amd64": "x86_64", "arm64": "aarch64"}[runtime.GOARCH]+"-unknown-linux-gnu")
	cargo := filepath.Join(tc, "bin/cargo")
	if _, err := os.Stat(cargo); err != nil {
		t.Skipf("not applicable on this host: no stable rustup toolchain at %s: %v", tc, err)
	}
	r := newRegistry(t)
	wt := worktree(t)
	if err := os.WriteFile(filepath.Join(wt, "Cargo.toml"), []byte("[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nhello = { version = \"1.0.0\", registry = \"test\" }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(wt, "src"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, "src/lib.rs"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	r.runIn(t, wt, []string{"CARGO_HOME=$WT/.cargo", "CARGO_REGISTRIES_TEST_INDEX=sparse+https://registry.test:" + strconv.Itoa(r.port) + "/index/",
		"CARGO_HTTP_CAINFO=" + r.caFile, "RUSTC=" + filepath.Join(tc, "bin/rustc"), "PATH=" + filepath.Join(tc, "bin") + ":/usr/bin:/bin"},
		[]string{tc}, cargo, "fetch")
	crates, _ := filepath.Glob(filepath.Join(wt, ".cargo/registry/cache/*/hello-1.0.0.crate"))
	if len(crates) != 1 {
		t.Fatalf("the crate was not fetched into CARGO_HOME (%v)", crates)
	}
}
