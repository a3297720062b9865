//go:build linux

package cli

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/confine-sandbox/confine/internal/serve"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// startServer starts `confine serve` as u for this test.
func startServer(t *testing.T, u testutil.User) *testutil.Server {
	t.Helper()
	s, err := testutil.StartServer(testutil.SelfBinary(t), u.UID, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// comparable drops what differs between any two runs of one command.
func comparable(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not one JSON object: %v\n%s", err, out)
	}
	for _, k := range []string{"run_id", "duration_ns", "usage"} {
		delete(m, k)
	}
	return m
}

// TestServeSameAsDirect: a run through the server prints what the same
// run prints directly: exit status, output, --json result (but for its
// id, duration and usage) and refusals.
func TestServeSameAsDirect(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			s := startServer(t, u)
			wd := testutil.Workdir(t, u.UID)
			script := `echo out; echo err >&2; printf '%s|%s|' "$LANG" "$FOO"; cat; ls -ld "$TMPDIR" | cut -c1-10; exit 3`
			tests := []struct {
				name string
				args []string
			}{
				{"live", []string{"--env", "FOO=bar", "--", "sh", "-c", script}},
				{"json", []string{"--json", "--env", "FOO=bar", "--", "sh", "-c", script}},
				{"live limit", []string{"--output-limit", "3", "--", "sh", "-c", "echo 123456789"}},
				{"not found", []string{"--", "/nonexistent"}},
				{"not found json", []string{"--json", "--", "/nonexistent"}},
				{"refused env json", []string{"--json", "--env", "LD_PRELOAD=/x.so", "--", "true"}},
				{"unknown profile json", []string{"--json", "--profile", "nope", "--", "true"}},
				{"timeout", []string{"--timeout", "1s", "--", "sleep", "30"}},
				{"signal", []string{"--", "sh", "-c", "kill -TERM $$"}},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					run := func(server []string, env ...string) testutil.Result {
						args := append(append([]string{"run"}, server...), tt.args...)
						c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: args, Env: env}
						cmd := c.Command()
						cmd.Stdin = strings.NewReader("in\n")
						return resultOf(t, cmd)
					}
					direct := run([]string{"--server="})
					for _, via := range []struct {
						name string
						r    testutil.Result
					}{
						{"--server=SOCKET", run([]string{"--server=" + s.Socket})},
						{"--server SOCKET", run([]string{"--server", s.Socket})},
						{"$CONFINE_SERVER", run(nil, ServerEnv+"="+s.Socket)},
					} {
						r := via.r
						if r.Code != direct.Code || r.Stderr != direct.Stderr {
							t.Fatalf("%s: exit %d, stderr %q; direct: exit %d, stderr %q", via.name, r.Code, r.Stderr, direct.Code, direct.Stderr)
						}
						if strings.Contains(strings.Join(tt.args, " "), "--json") {
							got, want := comparable(t, r.Stdout), comparable(t, direct.Stdout)
							g, _ := json.Marshal(got)
							w, _ := json.Marshal(want)
							if string(g) != string(w) {
								t.Fatalf("%s: --json differs\n got %s\nwant %s", via.name, g, w)
							}
						} else if r.Stdout != direct.Stdout {
							t.Fatalf("%s: stdout %q, direct %q", via.name, r.Stdout, direct.Stdout)
						}
					}
					t.Logf("exit %d, stdout %q", direct.Code, direct.Stdout)
				})
			}
		})
	}
}

// resultOf runs cmd (built by testutil.CLI) to completion.
func resultOf(t *testing.T, c *exec.Cmd) testutil.Result {
	t.Helper()
	var out, errb strings.Builder
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	r := testutil.Result{Stdout: out.String(), Stderr: errb.String(), Code: c.ProcessState.ExitCode()}
	if err != nil && c.ProcessState == nil {
		t.Fatal(err)
	}
	return r
}

// TestServeRefuses: no server, a dead one, one of another uid: the run is
// refused (125, the socket named), never run without it.
func TestServeRefuses(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	marker := filepath.Join(wd, "ran")
	dead := filepath.Join(t.TempDir(), "dead.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: dead, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	type tcase struct {
		name, socket string
		uid          int
		says         string
	}
	tests := []tcase{
		{"missing socket", filepath.Join(wd, "none.sock"), u.UID, "no such socket"},
		{"dead server", dead, u.UID, "nothing listens"},
	}
	if os.Geteuid() == 0 {
		other := startServer(t, testutil.User{Name: "nobody", UID: testutil.NobodyUID})
		root := startServer(t, testutil.User{Name: "root", UID: 0})
		tests = append(tests,
			tcase{"server of another uid", other.Socket, 0, "runs as uid 65534"},
			tcase{"client of another uid", root.Socket, testutil.NobodyUID, "permission denied"})
	} else {
		t.Logf("not root: the cross-uid cases need root")
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, json := range []bool{false, true} {
				args := []string{"run", "--server=" + tt.socket}
				if json {
					args = append(args, "--json")
				}
				args = append(args, "--", "sh", "-c", "touch "+marker)
				r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: tt.uid, Dir: "/", Args: args}.Run(t)
				if r.Code != ExitConfine || !strings.Contains(r.Stderr, tt.socket) || !strings.Contains(r.Stderr, tt.says) {
					t.Fatalf("exit %d, stderr %q; want 125 naming %s and saying %q", r.Code, r.Stderr, tt.socket, tt.says)
				}
				if json && !strings.Contains(r.Stdout, `"error"`) {
					t.Fatalf("--json: stdout %q, want the refusal object", r.Stdout)
				}
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("the command ran although the server refused")
				}
			}
		})
	}
	if os.Geteuid() == 0 {
		// The server's own check (SO_PEERCRED), past the client's: root
		// connects to a server of uid 65534 (root may open its socket).
		other := startServer(t, testutil.User{Name: "nobody", UID: testutil.NobodyUID})
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: other.Socket, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := serve.Do(context.Background(), c, &serve.Request{Spec: spec.CommandSpec{Program: "/bin/true", Worktree: wd}}, nil)
		if err != nil || resp.Error == nil || resp.Error.Kind != "peer" || resp.Result != nil {
			t.Fatalf("root's request to uid 65534's server: %+v, %v; want a peer refusal", resp, err)
		}
	}
}

// TestServeDisconnectKillsTree: SIGKILL the client of a running tree
// (one child in the background, one that left with setsid): the server
// ends the run, and every process of the tree is gone.
func TestServeDisconnectKillsTree(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			s := startServer(t, u)
			wd := testutil.Workdir(t, u.UID)
			token := testutil.NewToken()
			ready := filepath.Join(wd, "ready")
			script := `sleep 1000 & setsid sh -c 'exec sleep 1001' & sleep 0.2; touch ready; wait`
			c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd,
				Args: []string{"run", "--server=" + s.Socket, "--env", testutil.TokenEnv + "=" + token, "--", "sh", "-c", script}}
			cmd := c.Command()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var ps []int
			if !testutil.Await(func() bool {
				_, err := os.Stat(ready)
				ps = testutil.TokenPids(token)
				return err == nil && len(ps) >= 3
			}) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("the tree never got going (processes %v)", ps)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			if !testutil.Await(func() bool { return len(testutil.TokenPids(token)) == 0 }) {
				var alive []string
				for _, p := range testutil.TokenPids(token) {
					alive = append(alive, strconv.Itoa(p)+" ("+testutil.Comm(p)+")")
				}
				t.Fatalf("after the client died, processes %s of its tree (of %v) are alive", strings.Join(alive, ", "), ps)
			}
			t.Logf("the client's SIGKILL ended the tree of %d processes %v", len(ps), ps)

			// The control: the same tree unconfined outlives its parent's
			// SIGKILL (so the server, not the tree, ended it above).
			ctoken := testutil.NewToken()
			ctl := exec.Command("sh", "-c", strings.ReplaceAll(script, "touch ready", "touch ready.control"))
			ctl.Dir, ctl.Env = wd, []string{"PATH=/usr/bin:/bin", testutil.TokenEnv + "=" + ctoken}
			if os.Geteuid() == 0 && u.UID != 0 {
				ctl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.UID)}}
			}
			if err := ctl.Start(); err != nil {
				t.Fatal(err)
			}
			testutil.Await(func() bool {
				_, err := os.Stat(filepath.Join(wd, "ready.control"))
				return err == nil
			})
			_ = ctl.Process.Kill()
			_ = ctl.Wait()
			survivors := testutil.TokenPids(ctoken)
			for _, p := range survivors {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
			if len(survivors) == 0 {
				t.Fatalf("control: nothing of the unconfined tree outlived its parent, so the test proves nothing")
			}
		})
	}
}

// TestServeInterrupt: SIGINT to `run --server --json` ends the run on the
// server and prints its result, exit 130, as a direct run does.
func TestServeInterrupt(t *testing.T) {
	u := testutil.Users(t)[0]
	s := startServer(t, u)
	for _, server := range []string{"--server=", "--server=" + s.Socket} {
		t.Run(server, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd,
				Args: []string{"run", server, "--json", "--", "sh", "-c", "touch ready; exec sleep 100"}}
			cmd := c.Command()
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			testutil.StartReady(t, cmd, filepath.Join(wd, "ready"), "the command never started")
			_ = cmd.Process.Signal(syscall.SIGINT)
			_ = cmd.Wait()
			var res spec.CommandResult
			if code := cmd.ProcessState.ExitCode(); code != 130 || json.Unmarshal([]byte(out.String()), &res) != nil || !res.Cancelled {
				t.Fatalf("exit %d, stdout %q, stderr %q; want 130 and the cancelled run's result", code, out.String(), errb.String())
			}
		})
	}
}

// TestServeSocketDirRefused: `confine serve` refuses a socket directory
// others can enter (exit 125, the mode named) and never listens there.
func TestServeSocketDirRefused(t *testing.T) {
	for _, mode := range []os.FileMode{0o755, 0o711, 0o770} {
		d := filepath.Join(t.TempDir(), "d")
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, mode); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(d, "serve.sock")
		r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: os.Geteuid(), Dir: "/", Args: []string{"serve", "--socket", sock}}.Run(t)
		if r.Code != ExitConfine || !strings.Contains(r.Stderr, "must be 0700") {
			t.Fatalf("mode %04o: exit %d, stderr %q; want 125 and the mode rule", mode, r.Code, r.Stderr)
		}
		if _, err := os.Lstat(sock); err == nil {
			t.Fatalf("mode %04o: a socket was made at %s", mode, sock)
		}
	}
}

// TestRequireCap: with a capability required (run --require-cap,
// $CONFINE_REQUIRE_CAP, serve's environment), a run without --cap is
// refused before anything runs, and one with a valid token runs; a token
// asked for longer than the maximum lifetime is never minted.
func TestRequireCap(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	// The key outside the work tree: no run may have its control paths
	// in a writable root (docs/control-plane.md).
	key := filepath.Join(testutil.Workdir(t, u.UID), "cap.key")
	marker := filepath.Join(wd, "ran")
	cli := func(env []string, args ...string) testutil.Result {
		return testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: args, Env: env}.Run(t)
	}
	if r := cli(nil, "cap", "keygen", "--cap-key", key); r.Code != 0 {
		t.Fatalf("keygen: %+v", r)
	}
	if r := cli(nil, "cap", "mint", "--cap-key", key, "--ttl", "100000h"); r.Code != ExitConfine || !strings.Contains(r.Stderr, "over the maximum") || r.Stdout != "" {
		t.Fatalf("mint --ttl 100000h: exit %d, stdout %q, stderr %q; want refused", r.Code, r.Stdout, r.Stderr)
	}
	mint := cli(nil, "cap", "mint", "--cap-key", key, "--ttl", "1h")
	if mint.Code != 0 {
		t.Fatalf("mint: %+v", mint)
	}
	tok := strings.TrimSpace(mint.Stdout)
	s, err := testutil.StartServer(testutil.SelfBinary(t), u.UID, false, []string{RequireCapEnv + "=1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	touch := []string{"--", "sh", "-c", "touch " + marker}
	withCap := []string{"--cap", tok, "--cap-key", key}
	tests := []struct {
		name string
		env  []string
		args []string
		ok   bool
	}{
		{"--require-cap without --cap", nil, []string{"--server=", "--require-cap"}, false},
		{"env without --cap", []string{RequireCapEnv + "=1"}, []string{"--server="}, false},
		{"--require-cap with --cap", nil, append([]string{"--server=", "--require-cap"}, withCap...), true},
		{"server requires, client sends no cap", nil, []string{"--server=" + s.Socket}, false},
		{"server requires, client sends a cap", nil, append([]string{"--server=" + s.Socket}, withCap...), true},
		{"server requires, client sends a forged cap", nil, []string{"--server=" + s.Socket, "--cap", tok + "x", "--cap-key", key}, false},
		{"nothing required", nil, []string{"--server="}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(marker)
			r := cli(tt.env, append(append([]string{"run"}, tt.args...), touch...)...)
			_, statErr := os.Stat(marker)
			if tt.ok {
				if r.Code != 0 || statErr != nil {
					t.Fatalf("exit %d, stderr %q, marker %v; want the run to go", r.Code, r.Stderr, statErr)
				}
				return
			}
			if r.Code != ExitConfine || statErr == nil || !strings.Contains(r.Stderr, "capab") {
				t.Fatalf("exit %d, stderr %q, marker %v; want the run refused for want of a capability", r.Code, r.Stderr, statErr)
			}
			t.Logf("refused: %s", strings.TrimSpace(r.Stderr))
		})
	}
}

// TestServeGuardProfile: a profile file's [guard] holds through the
// server as in a direct run (the server resolves the file itself): its
// refused entries stay unchanged, its reported ones are written and
// reported, the outputs are the same; an invalid [guard] is refused the
// same way (exit 125, the same message).
func TestServeGuardProfile(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			s := startServer(t, u)
			dir := testutil.Workdir(t, u.UID)
			good := filepath.Join(dir, "guard.toml")
			bad := filepath.Join(dir, "bad.toml")
			for f, text := range map[string]string{
				good: "name = \"guard-changes\"\n[guard]\nrefuse = [\"envrc\"]\nreport = [\"git-hooks\"]\n[guard.add.makefile]\npattern = \"**/Makefile\"\naction = \"refuse\"\n",
				bad:  "name = \"guard-bad\"\n[guard]\nreport = [\"envrc\"]\n",
			} {
				if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			script := `echo x >> src/Makefile; echo x >> .envrc; echo h > .git/hooks/post-checkout; cat src/Makefile .envrc`
			for _, server := range []string{"--server=", "--server=" + s.Socket} {
				wd := testutil.Workdir(t, u.UID)
				for f, c := range map[string]string{".git/HEAD": "ref\n", "src/Makefile": "m\n", ".envrc": "e\n"} {
					p := filepath.Join(wd, f)
					if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(p, []byte(c), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(p, u.UID, u.UID); err != nil {
						t.Fatal(err)
					}
				}
				for _, d := range []string{".git", ".git/hooks", "src"} {
					if err := os.MkdirAll(filepath.Join(wd, d), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.Chown(filepath.Join(wd, d), u.UID, u.UID); err != nil {
						t.Fatal(err)
					}
				}
				c := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: []string{"run", server, "--profile", good, "--", "sh", "-c", script}}
				r := resultOf(t, c.Command())
				if r.Code != 0 || r.Stdout != "m\ne\n" || !strings.Contains(r.Stderr, "created .git/hooks/post-checkout") {
					t.Fatalf("%s: exit %d, stdout %q (want the refused files unchanged), stderr %q (want the hook reported)", server, r.Code, r.Stdout, r.Stderr)
				}
				c.Args = []string{"run", server, "--profile", bad, "--", "true"}
				r = resultOf(t, c.Command())
				if r.Code != 125 || !strings.Contains(r.Stderr, `guard.report[0]: persistence guard: invalid change to the protected set: row "envrc" is reported by default`) {
					t.Fatalf("%s: invalid [guard]: exit %d, stderr %q", server, r.Code, r.Stderr)
				}
			}
		})
	}
}
