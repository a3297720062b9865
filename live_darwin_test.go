//go:build darwin

package confine_test

// Live tests of the macOS backend. They need a Mac with
// /usr/bin/sandbox-exec and were never run on the Linux machines this
// project is built on; see docs/platforms.md. Each attack
// runs first unconfined (the control, which must succeed) and then under
// RunCommand (which must fail, with the side effect checked absent).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/seatbelt"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// macWaivers are the guarantees Seatbelt cannot enforce (the ledger's
// seatbelt layer): a run is refused unless its profile waives them.
func macProfile(t *testing.T, dir string) string {
	t.Helper()
	var waive []string
	for _, d := range seatbelt.Decide(os.Geteuid() == 0, false) {
		if d.Missing != "" {
			waive = append(waive, fmt.Sprintf("%q", d.Name))
		}
	}
	p := filepath.Join(dir, "mac.toml")
	body := fmt.Sprintf("name = \"mac\"\ntier = 2\nwaive = [%s]\n", strings.Join(waive, ", "))
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func macRun(t *testing.T, work string, ro []string, script string) (spec.CommandResult, error) {
	t.Helper()
	if err := seatbelt.Available(); err != nil {
		t.Skipf("no sandbox-exec here: %v", err)
	}
	prof, err := policy.ResolveProfile(macProfile(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	if err := eng.Register(prof); err != nil {
		t.Fatal(err)
	}
	c, err := eng.Mint(prof.Name, "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return confine.RunCommand(ctx, c, spec.CommandSpec{Program: "/bin/sh", Args: []string{"-c", script},
		Worktree: work, ReadOnly: ro, Profile: prof.Name, Limits: spec.Limits{WallTime: 30 * time.Second, KillGrace: time.Second}})
}

// control runs script unconfined and fails the test unless it succeeds.
func control(t *testing.T, dir, script string) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("control did not succeed, so the attack proves nothing here: %v: %s", err, out)
	}
}

func TestMacLive(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o644); err != nil {
		t.Fatal(err)
	}
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, ".netrc"), []byte("machine x password p4ss"), 0o600); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name, script string
		ro           []string
		absent       string // a file the attack would create
	}{
		{name: "outside-read", script: "cat " + secret},
		{name: "outside-write", script: "echo x > " + filepath.Join(outside, "w1"), absent: filepath.Join(outside, "w1")},
		{name: "shared-temp-write", script: "echo x > /private/tmp/confine-mac-" + filepath.Base(outside), absent: "/private/tmp/confine-mac-" + filepath.Base(outside)},
		{name: "network", script: fmt.Sprintf("exec 3<>/dev/tcp/127.0.0.1/%d", port)},
		{name: "credential-file", script: "cat " + filepath.Join(home, ".netrc"), ro: []string{home}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			work := t.TempDir()
			script := tt.script
			if tt.name == "network" {
				script = "/bin/bash -c '" + script + "'"
			}
			control(t, work, script)
			if tt.absent != "" {
				_ = os.Remove(tt.absent)
			}
			res, err := macRun(t, work, tt.ro, script)
			if err != nil {
				t.Fatalf("run refused, which proves nothing: %v", err)
			}
			if res.ExitCode == 0 {
				t.Fatalf("attack succeeded under seatbelt: %s", res.Stdout.Head)
			}
			if strings.Contains(string(res.Stdout.Head), "s3cret") || strings.Contains(string(res.Stdout.Head), "p4ss") {
				t.Fatalf("secret read: %s", res.Stdout.Head)
			}
			if tt.absent != "" {
				if _, err := os.Stat(tt.absent); !errors.Is(err, os.ErrNotExist) {
					t.Fatalf("%s was written", tt.absent)
				}
			}
		})
	}

	t.Run("workdir-write-works", func(t *testing.T) {
		work := t.TempDir()
		res, err := macRun(t, work, nil, "echo ok > out && cat out && echo t > $TMPDIR/t && cat $TMPDIR/t")
		if err != nil || res.ExitCode != 0 || !strings.Contains(string(res.Stdout.Head), "ok") {
			t.Fatalf("a write inside the worktree failed: %+v, %v", res, err)
		}
	})

	t.Run("tree-kill", func(t *testing.T) {
		work := t.TempDir()
		pidFile := filepath.Join(work, "pid")
		// A background child in the command's process group outlives it.
		res, err := macRun(t, work, nil, "sleep 300 & echo $! > pid")
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		pid := strings.TrimSpace(string(b))
		if res.Survivors < 1 {
			t.Errorf("survivors = %d, want the background sleep counted", res.Survivors)
		}
		// SIGKILLed, it may stay a zombie until launchd reaps it.
		for i := 0; exec.Command("/bin/kill", "-0", pid).Run() == nil; i++ {
			if i == 100 {
				t.Fatalf("pid %s outlived the run", pid)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}
