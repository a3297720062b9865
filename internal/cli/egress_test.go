//go:build linux

package cli

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// TestRunEgressAllowlist is the "done when": with a profile that
// allows allowed.test (both test names served on loopback, pinned to
// 127.0.0.1, a test CA passed through the usual variables),
// `confine run --profile P -- curl -sS https://allowed.test/` works,
// denied.test fails with a message naming how to allow it, and both
// leave complete records in --json and the event log.
func TestRunEgressAllowlist(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("curl is not installed: %v", err)
	}
	srv := testutil.ServeTLS(t, "allowed.test", "denied.test")
	port := strconv.Itoa(srv.Port)
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			ca := filepath.Join(wd, "ca.pem")
			prof := filepath.Join(wd, "net.toml")
			logPath := filepath.Join(testutil.Workdir(t, u.UID), "events.jsonl") // not in a writable root
			for _, f := range []struct {
				path string
				data string
			}{{ca, string(srv.CAPEM)}, {prof, fmt.Sprintf(`name = "net"
network = "allowlist"
[allowlist]
hosts = ["allowed.test:%s"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"allowed.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]
`, port)}} {
				if err := os.WriteFile(f.path, []byte(f.data), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(f.path, u.UID, u.UID); err != nil {
					t.Fatal(err)
				}
			}
			run := func(host string, json bool) testutil.Result {
				args := []string{"run", "--profile", prof, "--event-log", logPath, "--env", "SSL_CERT_FILE=" + ca, "--env", "CURL_CA_BUNDLE=" + ca}
				if json {
					args = append(args, "--json")
				}
				args = append(args, "--", curl, "-sS", "https://"+host+":"+port+"/")
				return cli(t, u, wd, args...)
			}
			r := run("allowed.test", false)
			if r.Code != 0 || r.Stdout != "hello from allowed.test\n" {
				t.Fatalf("allowed: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
			}
			r = run("denied.test", false)
			if r.Code == 0 || !strings.Contains(r.Stderr, "refused http-connect denied.test:"+port) ||
				!strings.Contains(r.Stderr, "to allow it: confine approve req-") {
				t.Fatalf("denied: exit %d\nstderr: %s", r.Code, r.Stderr)
			}
			for _, tt := range []struct {
				host, verdict string
			}{{"allowed.test", spec.VerdictAllowed}, {"denied.test", spec.VerdictDenied}} {
				r := run(tt.host, true)
				var res spec.CommandResult
				if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
					t.Fatalf("--json: %v\n%s", err, r.Stdout)
				}
				checkConnections(t, tt.host, tt.verdict, res.RunID, res.Connections)
			}
			// Four runs, four lines, each with its record.
			f, err := os.Open(logPath)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			sc := bufio.NewScanner(f)
			sc.Buffer(nil, 1<<20)
			n := 0
			for sc.Scan() {
				var ev struct {
					RunID       string            `json:"run_id"`
					Connections []spec.Connection `json:"connections"`
				}
				if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
					t.Fatal(err)
				}
				host, verdict := "allowed.test", spec.VerdictAllowed
				if n%2 == 1 {
					host, verdict = "denied.test", spec.VerdictDenied
				}
				checkConnections(t, host, verdict, ev.RunID, ev.Connections)
				n++
			}
			if n != 4 {
				t.Fatalf("%d event-log lines, want 4", n)
			}
			r = cli(t, u, wd, "inspect", "--event-log", logPath, "--last", "1")
			if r.Code != 0 || !strings.Contains(r.Stdout, "connections\n") || !strings.Contains(r.Stdout, "denied  http-connect denied.test:"+port) {
				t.Fatalf("inspect: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}

func checkConnections(t *testing.T, host, verdict, runID string, cs []spec.Connection) {
	t.Helper()
	if len(cs) != 1 {
		t.Fatalf("%s: connections %+v", host, cs)
	}
	c := cs[0]
	ok := c.Domain == host && c.Verdict == verdict && c.RunID == runID && c.PID > 0 && c.Protocol == "http-connect" && c.Reason != ""
	switch verdict {
	case spec.VerdictAllowed:
		ok = ok && c.BytesIn > 0 && c.BytesOut > 0 && c.Address == "127.0.0.1:"+strconv.Itoa(c.Port)
	default:
		ok = ok && c.ApprovalRequest != "" && c.BytesIn == 0 && c.Address == ""
	}
	if !ok {
		t.Fatalf("%s: record %+v", host, c)
	}
}

// TestRunEgressApproval: a refused host is granted with `confine approve
// REQUEST_ID`; the grant works for the same task only, and an altered
// token is refused.
func TestRunEgressApproval(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("curl is not installed: %v", err)
	}
	srv := testutil.ServeTLS(t, "allowed.test", "denied.test")
	port := strconv.Itoa(srv.Port)
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			// The log and the key lie outside the work directory: a run
			// refuses a writable root that holds them.
			state := testutil.Workdir(t, u.UID)
			ca, prof, logPath, key := filepath.Join(wd, "ca.pem"), filepath.Join(wd, "net.toml"), filepath.Join(state, "events.jsonl"), filepath.Join(state, "cap.key")
			profile := "name = \"net\"\nnetwork = \"allowlist\"\n[allowlist]\nspecial_addresses = [\"127.0.0.1/32\"]\n[allowlist.resolve]\n\"denied.test\" = [\"127.0.0.1\"]\n"
			for _, f := range [][2]string{{ca, string(srv.CAPEM)}, {prof, profile}} {
				if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(f[0], u.UID, u.UID); err != nil {
					t.Fatal(err)
				}
			}
			if r := cli(t, u, wd, "cap", "keygen", "--cap-key", key); r.Code != 0 {
				t.Fatalf("keygen: %d %s", r.Code, r.Stderr)
			}
			run := func(task string, extra ...string) testutil.Result {
				args := append([]string{"run", "--profile", prof, "--event-log", logPath, "--cap-key", key, "--task", task, "--json",
					"--env", "SSL_CERT_FILE=" + ca, "--env", "CURL_CA_BUNDLE=" + ca}, extra...)
				return cli(t, u, wd, append(args, "--", curl, "-sS", "https://denied.test:"+port+"/")...)
			}
			r := run("t1")
			var res spec.CommandResult
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res.ExitCode == 0 || len(res.Connections) != 1 {
				t.Fatalf("refused run: %v %+v", err, res)
			}
			req := res.Connections[0].ApprovalRequest
			a := cli(t, u, wd, "approve", req, "--cap-key", key, "--event-log", logPath)
			tok := strings.TrimSpace(a.Stdout)
			if a.Code != 0 || !strings.HasPrefix(tok, "cfg1.") || !strings.Contains(a.Stderr, "denied.test:"+port+" for task t1") {
				t.Fatalf("approve: %d\n%s\n%s", a.Code, a.Stdout, a.Stderr)
			}
			r = run("t1", "--approval", tok)
			res = spec.CommandResult{}
			if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil || res.ExitCode != 0 || string(res.Stdout.Head) != "hello from denied.test\n" {
				t.Fatalf("granted run: %v %+v\n%s", err, res, r.Stderr)
			}
			if c := res.Connections[0]; c.Verdict != spec.VerdictAllowed || !strings.HasPrefix(c.ApprovalID, "apv-") {
				t.Fatalf("granted record %+v", c)
			}
			for _, tt := range []struct {
				name, task, tok, msg string
			}{
				{"other task", "t2", tok, `is for task "t1"`},
				{"altered", "t1", tok[:len(tok)-3] + "AAA", "signature does not match"},
				{"unknown request", "", "", "not found"},
			} {
				var r testutil.Result
				if tt.name == "unknown request" {
					r = cli(t, u, wd, "approve", "req-0000000000000000", "--cap-key", key, "--event-log", logPath)
				} else {
					r = run(tt.task, "--approval", tt.tok)
				}
				if r.Code != 125 || !strings.Contains(r.Stderr, tt.msg) {
					t.Fatalf("%s: exit %d, stderr %s", tt.name, r.Code, r.Stderr)
				}
			}
		})
	}
}

// TestRunEgressCredential: the proxy adds a credential from the caller's
// environment for a credential route (plain http://api.test/ through the
// proxy, on over TLS), and the secret is nowhere the command can read:
// not its environment, not /proc (the CLI and a process of the caller
// hold it), not its files. The unconfined control finds it in /proc.
func TestRunEgressCredential(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skipf("curl is not installed: %v", err)
	}
	cert, _, caPEM, err := testutil.TLSCertificate("api.test")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cret-5a1f9c0e-credential"
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "Bearer "+secret {
			fmt.Fprintln(w, "authorized")
			return
		}
		fmt.Fprintln(w, "anonymous")
	}))
	up.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	up.StartTLS()
	defer up.Close()
	port := up.Listener.Addr().(*net.TCPAddr).Port
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			caDir := testutil.Workdir(t, u.UID)
			ca, prof := filepath.Join(caDir, "ca.pem"), filepath.Join(wd, "net.toml")
			profile := fmt.Sprintf(`name = "net"
network = "allowlist"
[allowlist]
hosts = ["api.test:%d"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"api.test" = ["127.0.0.1"]
[allowlist.credentials."api.test"]
header = "Authorization"
env = "CONFINE_TEST_API_TOKEN"
prefix = "Bearer "
ca_file = %q
port = %d
`, port, ca, port)
			for _, f := range [][2]string{{ca, string(caPEM)}, {prof, profile}} {
				if err := os.WriteFile(f[0], []byte(f[1]), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(f[0], u.UID, u.UID); err != nil {
					t.Fatal(err)
				}
			}
			// A process of the caller that holds the secret, as the
			// CLI does, for the duration of the test.
			holder := exec.Command("/bin/sleep", "600")
			holder.Env = []string{"CONFINE_TEST_API_TOKEN=" + secret}
			if os.Geteuid() == 0 && u.UID != 0 {
				holder.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
			}
			if err := holder.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { holder.Process.Kill(); holder.Wait() }()
			run := func(args ...string) testutil.Result {
				c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: []string{"CONFINE_TEST_API_TOKEN=" + secret},
					Args: append([]string{"run", "--profile", prof, "--"}, args...)}
				return c.Run(t)
			}
			if r := run(curl, "-sS", "http://api.test/whoami"); r.Code != 0 || r.Stdout != "authorized\n" {
				t.Fatalf("credential route: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
			}
			if r := run(curl, "-sS", fmt.Sprintf("https://api.test:%d/whoami", port)); r.Code == 0 || !strings.Contains(r.Stderr, "credential route") {
				t.Fatalf("a tunnel to the credential host: exit %d\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
			}
			search := `env; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do cat "$f"; echo; done 2>/dev/null; grep -rs -l s3cret "$HOME" "$TMPDIR" . 2>/dev/null; true`
			ctl := exec.Command("/bin/sh", "-c", search)
			ctl.Dir = wd
			ctl.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + wd, "TMPDIR=" + wd}
			if os.Geteuid() == 0 && u.UID != 0 {
				ctl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
			}
			out, _ := ctl.Output()
			if !strings.Contains(string(out), secret) {
				t.Fatalf("control: the unconfined search did not find the secret (the holder's /proc/%d/environ)", holder.Process.Pid)
			}
			r := run("/bin/sh", "-c", search)
			if r.Code != 0 || strings.Contains(r.Stdout+r.Stderr, secret) || !strings.Contains(r.Stdout, "PATH=") {
				t.Fatalf("the command found the secret (or the search did not run): exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
		})
	}
}
