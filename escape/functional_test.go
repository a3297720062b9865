//go:build linux

package escape

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// Real work still runs: the default profile must not break ordinary
// toolchains. A failure here means the sandbox is too strict for that
// work; it is reported, never worked around by loosening the sandbox.
func TestFunctional(t *testing.T) {
	type job struct {
		name  string
		files map[string]string // written into the work directory
		// needs lists programs that must exist on the host; a missing one
		// skips the job with the reason.
		needs []string
		args  func(t *testing.T, wd string) []string // `confine run` arguments after "run"
		want  string                                 // stdout must contain it
	}
	jobs := []job{
		{name: "shell-pipeline", needs: []string{"seq", "sort", "tail"},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "seq 1 1000 | sort -n | tail -1"}
			}, want: "1000\n"},
		{name: "fork-exec-background-jobs",
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", `for i in 1 2 3; do sh -c "echo job$i" & done; wait; echo done`}
			}, want: "done\n"},
		{name: "python-unix-socket-in-workdir", needs: []string{"python3"},
			files: map[string]string{"sock.py": pySocket},
			args: func(*testing.T, string) []string {
				return []string{"--", "python3", "sock.py"}
			}, want: "socketpair ok\nunix socket ok\n"},
		{name: "python-socketpair-dgram-refused", needs: []string{"python3"},
			files: map[string]string{"dg.py": pySocketpairDgram},
			args: func(*testing.T, string) []string {
				return []string{"--", "python3", "dg.py"}
			}, want: "dgram refused\n"},
		{name: "python-multiprocessing-process-pipe", needs: []string{"python3"},
			files: map[string]string{"mp.py": pyMultiprocessing},
			args: func(*testing.T, string) []string {
				return []string{"--", "python3", "mp.py"}
			}, want: "multiprocessing ok 42\n"},
		{name: "python-threads", needs: []string{"python3"},
			files: map[string]string{"th.py": pyThreads},
			args: func(*testing.T, string) []string {
				return []string{"--", "python3", "th.py"}
			}, want: "threads ok 8\n"},
		{name: "gcc-hello", needs: []string{"gcc"},
			files: map[string]string{"hello.c": cHello},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "gcc -O2 -pthread -o hello hello.c && ./hello"}
			}, want: "hello from C, thread ok\n"},
		{name: "make-j", needs: []string{"make", "gcc"},
			files: makeJFiles(),
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "make -j8 -s && ./prog"}
			}, want: "make ok 36\n"},
		{name: "go-build", needs: []string{"go"},
			files: map[string]string{"go.mod": "module example.com/hello\n\ngo 1.22\n", "main.go": goHello},
			args: func(t *testing.T, wd string) []string {
				goroot := goEnv(t, "GOROOT")
				args := []string{
					// GOPATH is a path list and must not be writable;
					// the module cache is named on its own.
					"--rw", goCache(t, wd), "--env", "GOCACHE=" + goCache(t, wd),
					"--env", "GOMODCACHE=" + filepath.Join(wd, ".gomodcache"),
					"--env", "GOFLAGS=-mod=mod",
					"--env", "GOPROXY=off",
					"--env", "GOTOOLCHAIN=local",
				}
				if !strings.HasPrefix(goroot, "/usr/") {
					args = append(args, "--ro", goroot)
				}
				goBin := filepath.Join(goroot, "bin", "go")
				return append(args, "--", "sh", "-c", goBin+" build -o hello . && ./hello")
			}, want: "hello from Go, 4 goroutines\n"},
		{name: "node-script", needs: []string{"node"},
			files: map[string]string{"hello.js": nodeHello},
			args: func(*testing.T, string) []string {
				return []string{"--", "node", "hello.js"}
			}, want: "hello from node 3\n"},
		// Runtimes that reserve far more address space than they use must
		// start under the default memory bound (issue 13): V8 reserves
		// about 10 GiB per WebAssembly memory, the JVM its whole heap,
		// the race detector its shadow. The bound counts what they commit.
		{name: "node-wasm-memory", needs: []string{"node"},
			args: func(*testing.T, string) []string {
				return []string{"--", "node", "-e", nodeWasm}
			}, want: "wasm ok 65536 grown 2\n"},
		{name: "c-large-prot-none-reservation", needs: []string{"gcc"},
			files: map[string]string{"reserve.c": cReserve},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "gcc -O2 -o reserve reserve.c && ./reserve"}
			}, want: "reserved 64 GiB, committed 64 MiB\n"},
		{name: "java-version", needs: []string{"java"},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "java -version 2>&1"}
			}, want: "Runtime Environment"},
		{name: "go-race-detector", needs: []string{"go", "gcc"},
			args: func(t *testing.T, wd string) []string {
				bin := raceBinary(t)
				dst := filepath.Join(wd, "race.test")
				if err := testutil.CopyFile(bin, dst, 0o755); err != nil {
					t.Fatal(err)
				}
				if os.Geteuid() == 0 {
					if err := os.Chown(dst, ownerOf(t, wd), ownerOf(t, wd)); err != nil {
						t.Fatal(err)
					}
				}
				return []string{"--", "./race.test", "-test.v"}
			}, want: "--- PASS: TestRace"},
		// Builds in a git work tree, whose .git the persistence guard
		// keeps read-only (issue 12), with top-level outputs that exist
		// beforehand, as a checkout's would after its first build;
		// TestFunctionalGitTree makes new ones under every backend.
		{name: "git-worktree-gcc", needs: []string{"gcc"},
			files: map[string]string{".git/HEAD": "ref: refs/heads/main\n", ".git/config": "[core]\n", "src/hello.c": cHello, "bin/.keep": ""},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "gcc -O2 -pthread -o bin/hello src/hello.c && mkdir -p bin/obj && bin/hello"}
			}, want: "hello from C, thread ok\n"},
		{name: "git-worktree-npm-install", needs: []string{"node", "npm"},
			files: map[string]string{".git/HEAD": "ref: refs/heads/main\n", "node_modules/.keep": "",
				"package.json":     `{"name":"app","version":"1.0.0","dependencies":{"dep":"file:dep"}}`,
				"dep/package.json": `{"name":"dep","version":"1.0.0","main":"index.js"}`, "dep/index.js": "module.exports = 42;\n",
				"main.js": "console.log('npm ok', require('dep'));\n"},
			args: func(*testing.T, string) []string {
				return []string{"--", "sh", "-c", "npm install --offline --no-audit --no-fund --no-package-lock >/dev/null && node main.js"}
			}, want: "npm ok 42\n"},
		{name: "git-worktree-commit-in-subdir-waived", needs: []string{"git"},
			files: map[string]string{".git/HEAD": "ref: refs/heads/main\n", "sub/a.txt": "a\n",
				"waive-git.toml": "name = \"git-writes\"\nwaive = [\"no-git-persistence\"]\n"},
			args: func(_ *testing.T, wd string) []string {
				return []string{"--profile", filepath.Join(wd, "waive-git.toml"), "--", "sh", "-c",
					"git init -q sub && git -C sub add a.txt && git -C sub -c user.name=t -c user.email=t@t commit -qm one && echo committed"}
			}, want: "committed\n"},
	}
	// Each user with the default backend, then under --backend bwrap.
	type pass struct {
		name, backend string
		u             testutil.User
	}
	var passes []pass
	for _, u := range testutil.Users(t) {
		passes = append(passes, pass{u.Name, "", u}, pass{u.Name + "/bwrap", "bwrap", u})
	}
	for _, ps := range passes {
		u := ps.u
		t.Run(ps.name, func(t *testing.T) {
			if ps.backend == "bwrap" {
				requireBwrap(t, u)
			}
			for _, j := range jobs {
				t.Run(j.name, func(t *testing.T) {
					for _, n := range j.needs {
						if n == "go" && goCommand != "" {
							continue
						}
						if _, err := exec.LookPath(n); err != nil {
							t.Skipf("not applicable on this host: %s missing (%v)", n, err)
						}
					}
					wd := testutil.Workdir(t, u.UID)
					for name, body := range j.files {
						p := filepath.Join(wd, name)
						for d := filepath.Dir(p); len(d) > len(wd); d = filepath.Dir(d) {
							if err := os.MkdirAll(d, 0o755); err != nil {
								t.Fatal(err)
							}
							if os.Geteuid() == 0 {
								if err := os.Chown(d, u.UID, u.UID); err != nil {
									t.Fatal(err)
								}
							}
						}
						if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
							t.Fatal(err)
						}
						if os.Geteuid() == 0 {
							if err := os.Chown(p, u.UID, u.UID); err != nil {
								t.Fatal(err)
							}
						}
					}
					args := []string{"run", "--workdir", wd, "--timeout", workTimeout().String()}
					if ps.backend != "" {
						args = append(args, "--backend", ps.backend)
					}
					args = append(args, j.args(t, wd)...)
					o := cliRun(t, u, wd, nil, args...)
					if o.limitHit {
						t.Fatalf("real work as %s: the harness killed confine after its run limit %v (CONFINE_TEST_RUN_LIMIT raises it on a slow host), before confine's own --timeout %v\nstdout: %s\nstderr: %s",
							u.Name, runLimit, workTimeout(), o.stdout, o.stderr)
					}
					if o.code != 0 || !strings.Contains(o.stdout, j.want) {
						t.Fatalf("real work failed in the sandbox as %s (too strict?): exit %d, want stdout containing %q\nstdout: %s\nstderr: %s",
							u.Name, o.code, j.want, o.stdout, o.stderr)
					}
					t.Logf("ok in %v: %s", o.elapsed.Round(1e6), fx.OneLine(o.stdout, 120))
				})
			}
		})
	}
}

// goCaches holds each uid's build cache (goCache).
var goCaches sync.Map

// goCache is the build cache of the owner of the work tree wd, shared by
// all the suite's go builds of that uid in this test binary and given to
// each run with --rw: the first build compiles the standard library (15 to
// 45 s on 2 cores, which every pass paid again with a cache of its own), the
// later ones reuse it. It lives outside the work trees, so a job's tree
// holds only what its build makes.
func goCache(t *testing.T, wd string) string {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(wd, &st); err != nil {
		t.Fatal(err)
	}
	uid := int(st.Uid)
	if d, ok := goCaches.Load(uid); ok {
		return d.(string)
	}
	d := filepath.Join(testutil.SharedDir(t), fmt.Sprintf("gocache-%d", uid))
	if err := os.MkdirAll(d, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, uid); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	if seed := os.Getenv(goCacheSeedEnv); seed != "" {
		if err := seedGoCache(seed, d, uid); err != nil {
			t.Fatalf("%s: %v", goCacheSeedEnv, err)
		}
	}
	goCaches.Store(uid, d)
	return d
}

// goCacheSeedEnv names a Go build cache filled beforehand by the same
// toolchain at the same GOROOT (the kernel matrix fills one on the host
// with `go build fmt sync`): each uid's cache starts as a copy of it, so
// that a guest under TCG compiles only the job's own package, not the
// standard library (3.5 to 4 minutes per uid there). The build still runs
// in the sandbox; only its inputs are warm.
const goCacheSeedEnv = "CONFINE_ESCAPE_GOCACHE_SEED"

// seedGoCache copies the cache tree seed into dst, owned by uid when the
// suite runs as root.
func seedGoCache(seed, dst string, uid int) error {
	return filepath.WalkDir(seed, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(seed, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case e.IsDir():
			err = os.MkdirAll(to, 0o700)
		case e.Type().IsRegular():
			err = testutil.CopyFile(p, to, 0o600)
		default:
			return nil
		}
		if err == nil && os.Geteuid() == 0 {
			err = os.Chown(to, uid, uid)
		}
		if err != nil {
			return fmt.Errorf("seeding the build cache %s from %s: %w", dst, seed, err)
		}
		return nil
	})
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	goBin := goCommand
	if goBin == "" {
		goBin = "go"
	}
	out, err := exec.Command(goBin, "env", name).Output()
	if err != nil {
		t.Fatalf("go env %s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

const pySocket = `import os, socket, threading
a, b = socket.socketpair()
a.sendall(b"ping")
assert b.recv(4) == b"ping"
print("socketpair ok", flush=True)
path = os.path.join(os.getcwd(), "server.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(1)
def serve():
    c, _ = srv.accept()
    c.sendall(c.recv(16).upper())
    c.close()
th = threading.Thread(target=serve, daemon=True)  # a failed connect must not hang the test
th.start()
cl = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
cl.connect(path)
cl.sendall(b"hello")
assert cl.recv(16) == b"HELLO"
cl.close()
th.join()
srv.close()
os.unlink(path)
print("unix socket ok", flush=True)
`

// AF_UNIX datagram sockets are refused by design, connected pairs too: a
// datagram socket can sendto() any pathname socket on the host (syslog,
// journald, sd_notify) whether or not it is connected, and seccomp cannot
// read sendmsg's address. The refusal must be a clean EACCES.
const pySocketpairDgram = `import socket
try:
    socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    print("dgram allowed", flush=True)
except PermissionError:
    print("dgram refused", flush=True)
`

const pyMultiprocessing = `import multiprocessing as mp
def work(conn, n):
    conn.send(n * 2)
    conn.close()
if __name__ == "__main__":
    parent, child = mp.Pipe()
    p = mp.Process(target=work, args=(child, 21))
    p.start()
    v = parent.recv()
    p.join()
    assert p.exitcode == 0
    print("multiprocessing ok", v, flush=True)
`

const pyThreads = `import threading
out = []
lock = threading.Lock()
def w(i):
    with lock:
        out.append(i)
ts = [threading.Thread(target=w, args=(i,)) for i in range(8)]
[t.start() for t in ts]
[t.join() for t in ts]
print("threads ok", len(out), flush=True)
`

const cHello = `#include <pthread.h>
#include <stdio.h>
static void *run(void *arg) { *(int *)arg = 1; return 0; }
int main(void) {
	pthread_t t; int ok = 0;
	if (pthread_create(&t, 0, run, &ok) != 0) return 1;
	pthread_join(t, 0);
	printf("hello from C, thread %s\n", ok ? "ok" : "failed");
	return !ok;
}
`

const goHello = `package main

import (
	"fmt"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); mu.Lock(); n++; mu.Unlock() }()
	}
	wg.Wait()
	fmt.Printf("hello from Go, %d goroutines\n", n)
}
`

const nodeHello = `const { execFileSync } = require("child_process");
const fs = require("fs");
fs.writeFileSync("out.txt", "3");
const n = execFileSync("cat", ["out.txt"]).toString();
Promise.resolve(n).then((v) => console.log("hello from node " + v));
`

// makeJFiles is a Makefile that compiles eight sources in parallel (make
// -j forks a shell and a compiler driver per job, which forks cc1 and as).
func makeJFiles() map[string]string {
	fs := map[string]string{
		"Makefile": "OBJS := main.o f1.o f2.o f3.o f4.o f5.o f6.o f7.o f8.o\n" +
			"prog: $(OBJS)\n\tgcc -o $@ $(OBJS)\n" +
			"%.o: %.c\n\tgcc -O2 -c -o $@ $<\n",
		"main.c": "#include <stdio.h>\n" +
			"int f1(void); int f2(void); int f3(void); int f4(void); int f5(void); int f6(void); int f7(void); int f8(void);\n" +
			"int main(void) { printf(\"make ok %d\\n\", f1()+f2()+f3()+f4()+f5()+f6()+f7()+f8()); return 0; }\n",
	}
	for i := 1; i <= 8; i++ {
		n := string(rune('0' + i))
		fs["f"+n+".c"] = "int f" + n + "(void) { return " + n + "; }\n"
	}
	return fs
}

// nodeWasm creates a WebAssembly memory (V8 reserves about 10 GiB of
// address space for it) and grows it by one page.
const nodeWasm = `const m = new WebAssembly.Memory({initial: 1, maximum: 65536});
const before = m.buffer.byteLength;
m.grow(1);
console.log("wasm ok", before, "grown", m.buffer.byteLength / 65536);`

// cReserve does what a JVM does with its heap: reserve a large range with
// PROT_NONE, then commit part of it and use it.
const cReserve = `#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
int main(void) {
	size_t reserve = (size_t)64 << 30, commit = (size_t)64 << 20;
	char *p = mmap(0, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED) { perror("reserve 64 GiB"); return 1; }
	if (mprotect(p, commit, PROT_READ | PROT_WRITE) != 0) { perror("commit"); return 1; }
	memset(p, 1, commit);
	printf("reserved 64 GiB, committed 64 MiB\n");
	return 0;
}
`

const raceTest = `package race

import (
	"sync"
	"testing"
)

func TestRace(t *testing.T) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	n := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); mu.Lock(); n++; mu.Unlock() }()
	}
	wg.Wait()
	if n != 8 {
		t.Fatal(n)
	}
}
`

var (
	raceOnce sync.Once
	raceBin  string
	raceErr  error
)

// raceBinary builds, once and unconfined (with the caller's build cache),
// a test binary with the race detector: what `go test -race` runs. The
// run under confine is what the memory bound affects (the detector's
// shadow memory); compiling the race runtime inside each run would cost
// minutes on a cold cache and bound nothing new.
func raceBinary(t *testing.T) string {
	t.Helper()
	if pre := os.Getenv(prebuiltRaceEnv); pre != "" {
		return pre
	}
	if os.Getenv(prebuiltProbeEnv) != "" {
		// Where the probe comes prebuilt (the kernel matrix's guests, the
		// Docker cells) nothing is compiled: a cold race runtime takes
		// minutes under emulation.
		t.Skipf("not applicable here: %s is set (nothing is compiled here) and %s is not", prebuiltProbeEnv, prebuiltRaceEnv)
	}
	raceOnce.Do(func() {
		// Beside the probe, in the suite's shared directory (removed
		// at its end).
		dir, err := os.MkdirTemp(filepath.Dir(probeDir), "race")
		if err != nil {
			raceErr = err
			return
		}
		for name, body := range map[string]string{"go.mod": "module example.com/race\n\ngo 1.22\n", "race_test.go": raceTest} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				raceErr = err
				return
			}
		}
		goBin := goCommand
		if goBin == "" {
			goBin = "go"
		}
		bin := filepath.Join(dir, "race.test")
		cmd := exec.Command(goBin, "test", "-race", "-c", "-o", bin, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
		if out, err := cmd.CombinedOutput(); err != nil {
			raceErr = fmt.Errorf("go test -race -c: %v\n%s", err, out)
			return
		}
		raceBin = bin
	})
	if raceErr != nil {
		t.Skipf("not applicable on this host: cannot build a race-detector binary: %v", raceErr)
	}
	return raceBin
}

// prebuiltRaceEnv names a race-detector test binary built beforehand
// (go test -race -c of raceTest), for environments that compile nothing.
const prebuiltRaceEnv = "CONFINE_ESCAPE_RACE_BIN"

// ownerOf is the uid owning path.
func ownerOf(t *testing.T, path string) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return int(st.Uid)
}
