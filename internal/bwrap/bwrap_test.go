//go:build linux

package bwrap

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/plan"
)

// ops splits bwrap arguments into options with their operands, as text.
func ops(args []string) []string {
	arity := map[string]int{"--ro-bind": 2, "--bind": 2, "--dev-bind": 2, "--symlink": 2, "--ro-bind-fd": 2,
		"--tmpfs": 1, "--proc": 1, "--hostname": 1, "--perms": 1, "--size": 1, "--cap-drop": 1}
	var out []string
	for i := 0; i < len(args); i++ {
		n := arity[args[i]]
		out = append(out, strings.Join(args[i:i+n+1], " "))
		i += n
	}
	return out
}

func has(list []string, s string) bool {
	for _, l := range list {
		if l == s {
			return true
		}
	}
	return false
}

func index(list []string, s string) int {
	for i, l := range list {
		if l == s {
			return i
		}
	}
	return -1
}

func TestArgs(t *testing.T) {
	d := t.TempDir()
	for _, sub := range []string{"ro/inner", "rw", "real"} {
		if err := os.MkdirAll(filepath.Join(d, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("real", filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	p := &plan.Plan{
		Landlock: plan.Landlock{
			ReadExec:  []string{d + "/ro", d + "/ro/inner", d + "/link", "/proc/cpuinfo", d + "/missing"},
			ReadWrite: []string{d + "/rw", d + "/ro/inner"},
			Devices:   []string{"/dev/null"},
		},
		Namespaces: &plan.Namespaces{Private: []string{"/dev/shm"}, TmpfsBytes: 4096, Hostname: "confine", Bwrap: "/usr/bin/bwrap"},
	}
	a := ops(Args(p))
	for _, want := range []string{
		"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--as-pid-1", "--clearenv",
		"--cap-drop ALL", "--proc /proc", "--hostname confine", "--size 4096", "--tmpfs /dev/shm",
		"--ro-bind " + d + "/ro " + d + "/ro",
		// writable inside read-only: bound again, writable
		"--bind " + d + "/ro/inner " + d + "/ro/inner",
		"--bind " + d + "/rw " + d + "/rw",
		// a symlinked root: its target bound, the link recreated
		"--ro-bind " + d + "/real " + d + "/real",
		"--symlink real " + d + "/link",
		"--dev-bind /dev/null /dev/null",
		"--symlink /proc/self/fd /dev/fd",
		"--ro-bind-fd 8 " + InitPath,
	} {
		if !has(a, want) {
			t.Errorf("missing %q in %q", want, a)
		}
	}
	for _, bad := range []string{
		"--ro-bind " + d + "/ro/inner " + d + "/ro/inner", // covered by the writable bind
		"--ro-bind /proc/cpuinfo /proc/cpuinfo",           // the fresh /proc has it
		"--share-net",
	} {
		if has(a, bad) {
			t.Errorf("unexpected %q in %q", bad, a)
		}
	}
	if strings.Contains(strings.Join(a, " "), "missing") {
		t.Errorf("a missing root is bound: %q", a)
	}
	if index(a, "--tmpfs /dev/shm") > index(a, "--ro-bind "+d+"/ro "+d+"/ro") {
		t.Errorf("the private tmpfs must come before the binds that may lie beneath it: %q", a)
	}
	if a[len(a)-2] != "--" || a[len(a)-1] != InitPath {
		t.Errorf("bwrap must exec the bound binary: %q", a[len(a)-2:])
	}
}

func TestProbe(t *testing.T) {
	path, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skipf("bwrap not installed here: %v", err)
	}
	if err := Probe(path); err != nil {
		t.Logf("bwrap cannot create its namespaces here: %v", err)
	} else {
		t.Logf("bwrap %s works here", path)
	}
	if err := Probe("/nonexistent/bwrap"); err == nil || !strings.Contains(err.Error(), "start bwrap") {
		t.Errorf("a missing bwrap: %v", err)
	}
	// A bwrap that rejects an option (as one without --size would) is
	// reported with its own message.
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'bwrap: Unknown option --size' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Probe(fake); err == nil || !strings.Contains(err.Error(), "Unknown option --size") {
		t.Errorf("an old bwrap: %v", err)
	}
}
