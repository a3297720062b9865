//go:build !linux && !darwin

package confine_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// TestRefusesWithoutBackend: on Windows (and any OS without a backend)
// RunCommand refuses with the sentinels, and the command never runs: the
// marker file it would create is absent.
func TestRefusesWithoutBackend(t *testing.T) {
	eng, err := policy.NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	c, err := eng.Mint("default", "test", 0)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	marker := dir + string(os.PathSeparator) + "ran"
	res, err := confine.RunCommand(context.Background(), c, spec.CommandSpec{Program: "cmd.exe", Args: []string{"/c", "echo x > " + marker},
		Worktree: dir, Profile: "default"})
	if !errors.Is(err, spec.ErrUnsupportedOS) || !errors.Is(err, spec.ErrUnavailable) {
		t.Fatalf("RunCommand = %+v, %v; want ErrUnsupportedOS and ErrUnavailable", res, err)
	}
	if _, serr := os.Stat(marker); serr == nil {
		t.Fatal("the command ran")
	}
	if len(confine.Backends()) != 0 {
		t.Fatalf("Backends() = %v on an OS without a backend", confine.Backends())
	}
}
