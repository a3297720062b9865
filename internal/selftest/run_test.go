//go:build linux

package selftest_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/internal/cli"
	"github.com/confine-sandbox/confine/internal/selftest"
	"github.com/confine-sandbox/confine/spec"
)

// The test binary plays confine: `run` and `__probe` go to the CLI.
func TestMain(m *testing.M) {
	confine.Init()
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == selftest.ProbeCommand) {
		os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

const content = "selftest harness test\n"

// victimDir is a directory outside the run with one file in it.
func victimDir(e *selftest.Env) (dir, file string, err error) {
	dir = filepath.Join(filepath.Dir(e.Workdir), "victim-"+filepath.Base(e.Workdir))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", "", err
	}
	file = filepath.Join(dir, "victim")
	return dir, file, os.WriteFile(file, []byte(content), 0o644)
}

func changed(p string) func() (bool, string) {
	return func() (bool, string) {
		b, err := os.ReadFile(p)
		if err != nil || string(b) != content {
			return true, p + " changed"
		}
		return false, p + " unchanged"
	}
}

// The harness itself must be able to fail: a sandbox that lets the attack
// through, an effect the probe did not report, a harmed victim, a control
// that does not escape and a run confine refuses are each told apart.
func TestVerdicts(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func(e *selftest.Env) (selftest.Fixture, error)
		want  string
	}{
		{"blocked", func(e *selftest.Env) (selftest.Fixture, error) {
			_, p, err := victimDir(e)
			return selftest.Fixture{Args: []string{p}, Effect: changed(p)}, err
		}, selftest.Blocked},
		// --rw grants the victim's directory: the write really happens.
		{"granted write escapes", func(e *selftest.Env) (selftest.Fixture, error) {
			d, p, err := victimDir(e)
			return selftest.Fixture{Args: []string{p}, RunFlags: []string{"--rw", d}, Effect: changed(p)}, err
		}, selftest.Escaped},
		// The probe is blocked, but the side effect is there: escaped.
		{"effect overrides the probe", func(e *selftest.Env) (selftest.Fixture, error) {
			_, p, err := victimDir(e)
			return selftest.Fixture{Args: []string{p}, Effect: func() (bool, string) { return true, "planted effect" }}, err
		}, selftest.Escaped},
		{"harmed victim", func(e *selftest.Env) (selftest.Fixture, error) {
			_, p, err := victimDir(e)
			f := selftest.Fixture{Args: []string{p}}
			if e.Confined {
				f.Intact = func() error { return errors.New("planted harm") }
			}
			return f, err
		}, selftest.Escaped},
		{"control does not escape", func(e *selftest.Env) (selftest.Fixture, error) {
			return selftest.Fixture{Args: []string{filepath.Join(e.Workdir, "no-such-dir", "f")}}, nil
		}, selftest.NotApplicable},
		{"refused run proves nothing", func(e *selftest.Env) (selftest.Fixture, error) {
			_, p, err := victimDir(e)
			return selftest.Fixture{Args: []string{p}, RunFlags: []string{"--ro", "/no/such/root"}}, err
		}, selftest.Error},
	}
	var cases []selftest.Case
	for _, tt := range tests {
		cases = append(cases, selftest.Case{Guarantee: spec.GFSWrite, Name: tt.name, Vector: "write-file", Setup: tt.setup})
	}
	rep, err := selftest.Run(selftest.Options{Confine: self}, cases)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Vectors) != len(tests) {
		t.Fatalf("got %d results for %d cases", len(rep.Vectors), len(tests))
	}
	for i, tt := range tests {
		v := rep.Vectors[i]
		if v.Verdict != tt.want {
			t.Errorf("%s: verdict %s, want %s\ncontrol: %s\nconfined: %s", tt.name, v.Verdict, tt.want, v.Control, v.Confined)
		}
	}
	if rep.OK || rep.Escaped != 3 || rep.Errors != 1 {
		t.Errorf("summary: ok %v, %d escaped, %d errors; want not ok, 3, 1", rep.OK, rep.Escaped, rep.Errors)
	}
}

func TestRunBadBackend(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = selftest.Run(selftest.Options{Confine: self, Backend: "firecracker"}, nil)
	if err == nil {
		t.Fatal("a backend that cannot run here must fail the selftest's set-up")
	}
	t.Logf("set-up failure: %v", err)
}
