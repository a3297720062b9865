//go:build linux

package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// hintBackends are the backends the denial tests run under: both, except
// where namespaces cannot be made (the simulated container), which says so.
func hintBackends(t *testing.T) []string {
	if testutil.SimulatingContainer() {
		t.Log("simulated container: namespaces are refused, so only --backend core runs here")
		return []string{"core"}
	}
	return []string{"namespaces", "core"}
}

// toolOutsideRoots puts an executable in a directory no run is granted
// (world-readable, so an unprivileged launcher finds it on the host) and
// returns its path.
func toolOutsideRoots(t *testing.T) string {
	dir, err := os.MkdirTemp("", "confine-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := exec.LookPath("true")
	if err != nil {
		t.Skipf("no true(1) to copy: %v", err)
	}
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	tool := filepath.Join(bin, "outside-tool")
	out, err := os.OpenFile(tool, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return tool
}

// A program that exists on the host outside the granted roots: the run
// is refused (127, or 126 where Landlock refuses the execute) with one
// line naming the fix, --ro of its directory, which the refusal object
// carries as a denial too; with that grant the same run succeeds (the
// control). Found by path and through the caller's PATH, as root and as
// an unprivileged user, under both backends.
func TestDenialProgramOutsideView(t *testing.T) {
	tool := toolOutsideRoots(t)
	dir := filepath.Dir(tool)
	fix := "--ro " + dir
	for _, u := range testutil.Users(t) {
		wd := testutil.Workdir(t, u.UID)
		for _, b := range hintBackends(t) {
			for _, how := range []struct {
				name string
				prog string
				env  []string
			}{{"path", tool, nil}, {"PATH", "outside-tool", []string{"PATH=" + dir + ":/usr/bin:/bin"}}} {
				t.Run(u.Name+"/"+b+"/"+how.name, func(t *testing.T) {
					run := func(args ...string) testutil.Result {
						return testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: how.env,
							Args: append([]string{"run", "--backend", b}, args...)}.Run(t)
					}
					r := run("--", how.prog)
					if r.Code != ExitNotFound && r.Code != ExitNotExecutable {
						t.Fatalf("exit %d, want 127 or 126; stderr %s", r.Code, r.Stderr)
					}
					lines := strings.Split(strings.TrimSpace(r.Stderr), "\n")
					if len(lines) != 1 || !strings.Contains(lines[0], "to allow it: "+fix) || !strings.Contains(lines[0], tool) {
						t.Fatalf("stderr %q: want one line naming %s and %q", r.Stderr, tool, fix)
					}
					r = run("--json", "--", how.prog)
					var ref struct {
						Error struct {
							Denials []spec.Denial `json:"denials"`
						} `json:"error"`
					}
					if err := json.Unmarshal([]byte(r.Stdout), &ref); err != nil || len(ref.Error.Denials) != 1 ||
						ref.Error.Denials[0].Hint != fix || ref.Error.Denials[0].Path != tool {
						t.Fatalf("refusal %s (%v): want one denial of %s with hint %q", r.Stdout, err, tool, fix)
					}
					// The control: the hint's grant is the fix.
					if r := run("--ro", dir, "--", how.prog); r.Code != 0 {
						t.Fatalf("with %s: exit %d, stderr %s", fix, r.Code, r.Stderr)
					}
				})
			}
		}
	}
}

// An internet socket under network = "deny-all" is refused as before
// (EAFNOSUPPORT) and now reported: one line naming the refusal and its
// fix, and a denial with the hint in the result. Only socket() is
// attempted: no address is ever given. The control creates the same
// socket unconfined.
func TestDenialInetSocket(t *testing.T) {
	// The system's python, inside the default read roots.
	py := "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("no %s to make the socket with: %v", py, err)
	}
	const prog = "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM); s.close(); print('made')"
	if out, err := exec.Command(py, "-c", prog).Output(); err != nil || string(out) != "made\n" {
		t.Fatalf("control: unconfined socket(): %q %v", out, err)
	}
	const fix = `a profile with network = "allowlist"`
	for _, u := range testutil.Users(t) {
		wd := testutil.Workdir(t, u.UID)
		for _, b := range hintBackends(t) {
			t.Run(u.Name+"/"+b, func(t *testing.T) {
				r := cli(t, u, wd, "run", "--backend", b, "--", py, "-c", prog)
				if r.Code == 0 || strings.Contains(r.Stdout, "made") || !strings.Contains(r.Stderr, "Address family not supported") {
					t.Fatalf("confined socket(): exit %d, stdout %q, stderr %s", r.Code, r.Stdout, r.Stderr)
				}
				var hinted []string
				for _, l := range strings.Split(r.Stderr, "\n") {
					if strings.HasPrefix(l, "confine: denied socket AF_INET") {
						hinted = append(hinted, l)
					}
				}
				if len(hinted) != 1 || !strings.Contains(hinted[0], "to allow it: "+fix) {
					t.Fatalf("stderr %s: want one line naming the refused socket and %q", r.Stderr, fix)
				}
				r = cli(t, u, wd, "run", "--backend", b, "--json", "--", py, "-c", prog)
				var res spec.CommandResult
				if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
					t.Fatalf("result %s: %v", r.Stdout, err)
				}
				found := false
				for _, d := range res.Denials {
					found = found || d.Syscall == "socket" && d.Path == "AF_INET" && d.Errno == "EAFNOSUPPORT" && strings.HasPrefix(d.Hint, fix)
				}
				if !found {
					t.Fatalf("denials %+v: want socket AF_INET, EAFNOSUPPORT, with the hint", res.Denials)
				}
			})
		}
	}
}

// A write or a read outside the grants, which the kernel refuses on its
// own (Landlock's EACCES, or EROFS and ENOENT from the namespaced view):
// the command's error message names the path, and the run adds one line
// with the fix (--rw or --ro of the directory) and the same denial to its
// result. The control: with that grant the same command succeeds.
func TestDenialInferredFromMessage(t *testing.T) {
	dir, err := os.MkdirTemp("", "confine-other-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data.txt")
	if err := os.WriteFile(data, []byte("host data\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, u := range testutil.Users(t) {
		wd := testutil.Workdir(t, u.UID)
		for _, b := range hintBackends(t) {
			for _, c := range []struct {
				name    string
				argv    []string
				syscall string
				fix     string // the flag and its value
				out     string // the control's stdout
			}{
				{"write", []string{"sh", "-c", "echo x > " + filepath.Join(dir, u.Name+"-"+b+".txt") + " && echo wrote"}, "write", "--rw " + dir, "wrote\n"},
				{"python-write", []string{"/usr/bin/python3", "-c", "open('" + filepath.Join(dir, u.Name+"-"+b+".py.txt") + "', 'w').write('x'); print('wrote')"}, "write", "--rw " + dir, "wrote\n"},
				{"read", []string{"cat", data}, "open", "--ro " + dir, "host data\n"},
			} {
				t.Run(u.Name+"/"+b+"/"+c.name, func(t *testing.T) {
					if _, err := os.Stat(c.argv[0]); filepath.IsAbs(c.argv[0]) && err != nil {
						t.Skipf("%s is not installed: %v", c.argv[0], err)
					}
					run := func(extra ...string) testutil.Result {
						args := append([]string{"run", "--backend", b}, extra...)
						return cli(t, u, wd, append(append(args, "--"), c.argv...)...)
					}
					r := run()
					var lines []string
					for _, l := range strings.Split(r.Stderr, "\n") {
						if strings.HasPrefix(l, "confine: denied") {
							lines = append(lines, l)
						}
					}
					if r.Code == 0 || len(lines) != 1 || !strings.HasPrefix(lines[0], "confine: denied "+c.syscall+" ") || !strings.HasSuffix(lines[0], "to allow it: "+c.fix) {
						t.Fatalf("exit %d, stderr %q: want one line denying %s, ending with %q", r.Code, r.Stderr, c.syscall, "to allow it: "+c.fix)
					}
					r = run("--json")
					var res spec.CommandResult
					if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
						t.Fatalf("result %s: %v", r.Stdout, err)
					}
					if len(res.Denials) != 1 || res.Denials[0].Hint != c.fix || res.Denials[0].Syscall != c.syscall {
						t.Fatalf("denials %+v: want one %s with hint %q", res.Denials, c.syscall, c.fix)
					}
					flag, val, _ := strings.Cut(c.fix, " ")
					if r := run(flag, val); r.Code != 0 || r.Stdout != c.out {
						t.Fatalf("with %s: exit %d, stdout %q, stderr %s", c.fix, r.Code, r.Stdout, r.Stderr)
					}
				})
			}
		}
	}
}

// An allowlisted name that resolves to a special address (here loopback,
// pinned; the npm registry resolved to a documentation range): the
// proxy refuses it, and the fix is special_addresses, not the hosts entry
// the name already has. The command tries twice, as npm's retries do: one
// line on stderr names the refusal and that fix, with the count; the
// result's connections carry the same hint. The control: with the hint's
// special_addresses the same command reaches the (loopback) server.
func TestDenialSpecialAddress(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("curl is not installed: %v", err)
	}
	srv := testutil.ServeTLS(t, "allowed.test")
	port := strconv.Itoa(srv.Port)
	const fix = `add special_addresses = ["127.0.0.1/32"] to the profile's [allowlist]`
	for _, u := range testutil.Users(t) {
		wd := testutil.Workdir(t, u.UID)
		ca := filepath.Join(wd, "ca.pem")
		prof := func(special string) string {
			return fmt.Sprintf("name = \"net\"\nnetwork = \"allowlist\"\n[allowlist]\nhosts = [\"allowed.test:%s\"]\n%s[allowlist.resolve]\n\"allowed.test\" = [\"127.0.0.1\"]\n", port, special)
		}
		for _, f := range [][2]string{{ca, string(srv.CAPEM)}, {filepath.Join(wd, "net.toml"), prof("")},
			{filepath.Join(wd, "fixed.toml"), prof("special_addresses = [\"127.0.0.1/32\"]\n")}} {
			if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(f[0], u.UID, u.UID); err != nil && os.Geteuid() == 0 {
				t.Fatal(err)
			}
		}
		get := curl + " -sS https://allowed.test:" + port + "/"
		for _, b := range hintBackends(t) {
			t.Run(u.Name+"/"+b, func(t *testing.T) {
				run := func(profile string, extra ...string) testutil.Result {
					args := append([]string{"run", "--backend", b, "--profile", filepath.Join(wd, profile),
						"--env", "SSL_CERT_FILE=" + ca, "--env", "CURL_CA_BUNDLE=" + ca}, extra...)
					return cli(t, u, wd, append(args, "--", "sh", "-c", get+"; "+get)...)
				}
				r := run("net.toml")
				var lines []string
				for _, l := range strings.Split(r.Stderr, "\n") {
					if strings.HasPrefix(l, "confine: network: refused") {
						lines = append(lines, l)
					}
				}
				if r.Code == 0 || strings.Contains(r.Stdout, "hello") || len(lines) != 1 ||
					!strings.HasPrefix(lines[0], "confine: network: refused http-connect allowed.test:"+port+": ") ||
					!strings.Contains(lines[0], "to allow it: "+fix) || !strings.HasSuffix(lines[0], " (2 times)") {
					t.Fatalf("exit %d, stdout %q, stderr %s: want one line refusing allowed.test:%s twice, with %q", r.Code, r.Stdout, r.Stderr, port, fix)
				}
				r = run("net.toml", "--json")
				var res spec.CommandResult
				if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
					t.Fatalf("result %s: %v", r.Stdout, err)
				}
				if len(res.Connections) != 2 {
					t.Fatalf("connections %+v: want the two refused attempts", res.Connections)
				}
				for _, c := range res.Connections {
					if c.Verdict != spec.VerdictDenied || !strings.HasPrefix(c.Hint, fix) || !strings.Contains(c.Reason, "special addresses") {
						t.Fatalf("connection %+v: want denied with the hint %q", c, fix)
					}
				}
				if r := run("fixed.toml"); r.Code != 0 || r.Stdout != "hello from allowed.test\nhello from allowed.test\n" {
					t.Fatalf("with special_addresses: exit %d, stdout %q, stderr %s", r.Code, r.Stdout, r.Stderr)
				}
			})
		}
	}
}
