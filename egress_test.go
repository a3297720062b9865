//go:build linux

package confine_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// egressFixture serves allowed.test and denied.test (one certificate
// from a throw-away CA) over TLS on loopback, and has a profile that
// allows allowed.test only, both names pinned to 127.0.0.1.
type egressFixture struct {
	port   int
	caFile string
	caDir  string
	cap    *policy.Cap
}

func newEgressFixture(t *testing.T) *egressFixture {
	t.Helper()
	srv := testutil.ServeTLS(t, "allowed.test", "denied.test")
	f := &egressFixture{port: srv.Port}
	f.caDir = worktree(t)
	if err := os.Chmod(f.caDir, 0o755); err != nil {
		t.Fatal(err)
	}
	f.caFile = filepath.Join(f.caDir, "ca.pem")
	if err := os.WriteFile(f.caFile, srv.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	prof, err := profileFromTOML(t, []byte(fmt.Sprintf(`name = "egress-test"
network = "allowlist"
[allowlist]
hosts = ["allowed.test:%d"]
special_addresses = ["127.0.0.1/32"]
[allowlist.resolve]
"allowed.test" = ["127.0.0.1"]
"denied.test" = ["127.0.0.1"]
`, f.port)), "egress-test.toml")
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
	if f.cap, err = e.Mint(prof.Name, "test", 0); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *egressFixture) url(host string) string {
	return "https://" + host + ":" + strconv.Itoa(f.port) + "/"
}

func (f *egressFixture) run(t *testing.T, prog string, args ...string) spec.CommandResult {
	t.Helper()
	wt := worktree(t)
	s := spec.CommandSpec{Program: prog, Args: args, Worktree: wt, ReadOnly: []string{f.caDir},
		Env: []string{"LANG=C.UTF-8", "SSL_CERT_FILE=" + f.caFile, "CURL_CA_BUNDLE=" + f.caFile}, TaskID: "task-7", JobID: "job-3"}
	res, err := confine.RunCommand(context.Background(), f.cap, s)
	if err != nil {
		t.Fatalf("%s %v: %v", prog, args, err)
	}
	return res
}

func needProgram(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: %v", name, err)
	}
	return p
}

// TestEgressCurl: through the proxy curl reaches the allowed host and not
// the denied one, and each connection leaves a complete record.
func TestEgressCurl(t *testing.T) {
	curl := needProgram(t, "curl")
	f := newEgressFixture(t)

	res := f.run(t, curl, "-sS", f.url("allowed.test"))
	t.Logf("backend %s, layers %v", res.Backend, res.Layers)
	if res.ExitCode != 0 || string(res.Stdout.Head) != "hello from allowed.test\n" {
		t.Fatalf("allowed: exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout.Head, res.Stderr.Head)
	}
	if !strings.Contains(guarantee(res, spec.GNoNetwork), "egress proxy") {
		t.Fatalf("no-network mechanism %q does not name the egress proxy", guarantee(res, spec.GNoNetwork))
	}
	if len(res.Connections) != 1 {
		t.Fatalf("connections %+v", res.Connections)
	}
	c := res.Connections[0]
	if c.Verdict != spec.VerdictAllowed || c.Domain != "allowed.test" || c.Port != f.port || c.Protocol != "http-connect" ||
		c.BytesIn == 0 || c.BytesOut == 0 || c.PID <= 0 || c.RunID != res.RunID || c.TaskID != "task-7" || c.JobID != "job-3" {
		t.Fatalf("allowed record %+v", c)
	}

	res = f.run(t, curl, "-sS", f.url("denied.test"))
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr.Head), "403") {
		t.Fatalf("denied: exit %d, stderr %q", res.ExitCode, res.Stderr.Head)
	}
	if len(res.Connections) != 1 {
		t.Fatalf("connections %+v", res.Connections)
	}
	c = res.Connections[0]
	if c.Verdict != spec.VerdictDenied || c.Domain != "denied.test" || c.ApprovalRequest == "" || c.PID <= 0 ||
		!strings.Contains(c.Reason, "not in the profile's allowlist") || c.BytesIn != 0 {
		t.Fatalf("denied record %+v", c)
	}
}

// TestEgressBypass: a program that ignores the proxy variables and
// connects to the allowed host's address itself fails, and the attempt is
// recorded. The unconfined control shows the same command reaches it.
func TestEgressBypass(t *testing.T) {
	curl := needProgram(t, "curl")
	f := newEgressFixture(t)
	args := []string{"-sS", "--noproxy", "*", "--resolve", "allowed.test:" + strconv.Itoa(f.port) + ":127.0.0.1", f.url("allowed.test")}

	ctl := exec.Command(curl, append([]string{"--cacert", f.caFile}, args...)...)
	if out, err := ctl.CombinedOutput(); err != nil || string(out) != "hello from allowed.test\n" {
		t.Fatalf("control: %v %q", err, out)
	}
	res := f.run(t, curl, args...)
	if res.ExitCode == 0 || len(res.Stdout.Head) != 0 {
		t.Fatalf("bypass: exit %d, stdout %q", res.ExitCode, res.Stdout.Head)
	}
	var direct bool
	for _, c := range res.Connections {
		direct = direct || c.Protocol == "tcp-direct" && c.Verdict == spec.VerdictDenied && c.Port == f.port && c.PID > 0
	}
	if !direct {
		t.Fatalf("no record of the direct connect: %+v", res.Connections)
	}
}

// TestEgressUDP: UDP (and so DNS) stays refused under an allowlist; the
// unconfined control delivers the same datagram.
func TestEgressUDP(t *testing.T) {
	const py = "/usr/bin/python3"
	if _, err := os.Stat(py); err != nil {
		t.Skipf("not applicable on this host: no %s: %v", py, err)
	}
	f := newEgressFixture(t)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	script := fmt.Sprintf("import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', %d)); print('sent')", pc.LocalAddr().(*net.UDPAddr).Port)
	if out, err := exec.Command(py, "-c", script).CombinedOutput(); err != nil || string(out) != "sent\n" {
		t.Fatalf("control: %v %q", err, out)
	}
	res := f.run(t, py, "-c", script)
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr.Head), "Permission denied") {
		t.Fatalf("UDP under the allowlist: exit %d, stderr %q", res.ExitCode, res.Stderr.Head)
	}
}

func guarantee(res spec.CommandResult, name string) string {
	for _, g := range res.Guarantees {
		if g.Name == name {
			return g.Mechanism
		}
	}
	return ""
}

// profileFromTOML loads the profile text data as the file name would be.
func profileFromTOML(t *testing.T, data []byte, name string) (policy.Profile, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return policy.ResolveProfile(p)
}
