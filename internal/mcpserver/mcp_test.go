//go:build linux

package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	confine "github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/cli"
	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/mcpserver"
	"github.com/confine-sandbox/confine/internal/testutil"
)

func TestMain(m *testing.M) {
	confine.Init()
	mcpserver.Register()
	testutil.WrapContainer(false)
	if os.Getenv(testutil.CLIEnv) == "1" {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	testutil.RemoveSharedDir()
	os.Exit(code)
}

// nodeClient returns the test client (testdata/node with the official
// TypeScript SDK installed by `npm install` there, as .ci/run does), copied
// where every uid can read it. Without node or the SDK the test is
// skipped, saying why, except in CI, where it fails.
func nodeClient(t *testing.T) string {
	t.Helper()
	missing := ""
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not installed"
	} else if _, err := os.Stat("testdata/node/node_modules/@modelcontextprotocol/sdk/package.json"); err != nil {
		missing = "testdata/node/node_modules is missing: run `npm install --prefix internal/mcpserver/testdata/node` (.ci/run does)"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the MCP client tests need the TypeScript SDK in CI: %s", missing)
		}
		t.Skipf("MCP client tests skipped: %s", missing)
	}
	dst := filepath.Join(testutil.SharedDir(t), "node-client")
	if _, err := os.Stat(dst); err != nil {
		if out, err := exec.Command("cp", "-a", "testdata/node", dst).CombinedOutput(); err != nil {
			t.Fatalf("copy the client: %v: %s", err, out)
		}
		if out, err := exec.Command("chmod", "-R", "a+rX", dst).CombinedOutput(); err != nil {
			t.Fatalf("chmod the client: %v: %s", err, out)
		}
	}
	return dst
}

// step is one tool call of a plan.
type step struct {
	Name     string         `json:"name"`
	Tool     string         `json:"tool"`
	Args     map[string]any `json:"args"`
	CancelOn string         `json:"cancel_on,omitempty"`
}

// outcome is a step's line from the client.
type outcome struct {
	Step     int      `json:"step"`
	Event    string   `json:"event"`
	Error    string   `json:"error"`
	Progress []string `json:"progress"`
	Tools    []string `json:"tools"`
	Schemas  map[string]struct {
		Properties           map[string]any `json:"properties"`
		AdditionalProperties *bool          `json:"additionalProperties"`
	} `json:"schemas"`
	Result struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
		Structured json.RawMessage `json:"structuredContent"`
		IsError    bool            `json:"isError"`
	} `json:"result"`
}

func (o outcome) text() string {
	var b strings.Builder
	for _, c := range o.Result.Content {
		b.WriteString(c.Text)
	}
	return b.String()
}

// everything is all that the client saw, for failure messages.
func (o outcome) everything() string {
	return o.text() + string(o.Result.Structured) + o.Error + strings.Join(o.Progress, "")
}

// session is a running client.
type session struct {
	t     *testing.T
	cmd   *exec.Cmd
	in    io.WriteCloser
	out   *bufio.Scanner
	trace bytes.Buffer
}

// startClient runs the node client as uid on a plan.
func startClient(t *testing.T, uid int, dir string, plan map[string]any) *session {
	t.Helper()
	client := nodeClient(t)
	b, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	pf := filepath.Join(dir, "plan.json")
	if err := os.WriteFile(pf, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &session{t: t}
	s.cmd = exec.Command("node", filepath.Join(client, "client.mjs"), pf)
	s.cmd.Dir = dir
	s.cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir}
	s.cmd.Stderr = &s.trace
	if os.Geteuid() == 0 && uid != 0 {
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.out = bufio.NewScanner(stdout)
	s.out.Buffer(make([]byte, 1<<20), 64<<20)
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.in.Close()
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	})
	return s
}

// next is the client's next line.
func (s *session) next() outcome {
	s.t.Helper()
	if !s.out.Scan() {
		s.t.Fatalf("the client ended early (%v); its stderr and the server's:\n%s", s.out.Err(), s.trace.String())
	}
	var o outcome
	if err := json.Unmarshal(s.out.Bytes(), &o); err != nil {
		s.t.Fatalf("client line %q: %v", s.out.Text(), err)
	}
	return o
}

func (s *session) send() {
	s.t.Helper()
	if _, err := io.WriteString(s.in, "go\n"); err != nil {
		s.t.Fatal(err)
	}
}

func (s *session) wait() {
	s.t.Helper()
	if o := s.next(); o.Event != "done" {
		s.t.Fatalf("want the end of the plan, got %+v", o)
	}
	if err := s.cmd.Wait(); err != nil {
		s.t.Fatalf("client: %v\n%s", err, s.trace.String())
	}
}

// serverCommand is the confine CLI (this test binary acting as it) with
// args, as the client starts it: path, argv and environment.
func serverCommand(t *testing.T, uid int, dir string, env []string, args ...string) map[string]any {
	c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: uid, Dir: dir, Env: env, Args: args}.Command()
	m := map[string]string{}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return map[string]any{"command": c.Path, "args": c.Args[1:], "env": m, "cwd": dir}
}

// asUser runs a shell script as uid (the controls run the same attack
// without confine, as the same user).
func asUser(t *testing.T, uid int, dir, script string, env ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	if os.Geteuid() == 0 && uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	}
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func readEvents(t *testing.T, path string) []eventlog.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var evs []eventlog.Event
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e eventlog.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("event %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}

func exists(p string) bool { _, err := os.Lstat(p); return err == nil }

// waitGone waits until no process carries token and none of pids is
// alive (a process on its way out may have lost its environment before
// it is gone); it returns the ones that remain.
func waitGone(token string, pids []int) []int {
	var left []int
	testutil.Await(func() bool {
		left = testutil.TokenPids(token)
		for _, p := range pids {
			if testutil.Alive(p) && !slices.Contains(left, p) {
				left = append(left, p)
			}
		}
		return len(left) == 0
	})
	return left
}

func fmtArgs(a map[string]any) string {
	b, _ := json.Marshal(a)
	return string(b)
}
