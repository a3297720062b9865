//go:build linux

package confine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/spec"
)

// TestControlPlaneRefusals: a library run whose writable roots hold one of
// confine's own control paths is refused, naming it, whoever names the
// path (the caller's environment, the launcher's event log, its
// ControlPaths); a read-only root holding one runs, the path left out
// (docs/control-plane.md).
func TestControlPlaneRefusals(t *testing.T) {
	_, c := mint(t, "default", 0)
	tests := []struct {
		name   string
		setup  func(wt string) (*confine.Launcher, spec.CommandSpec)
		refuse string // a part of the refusal; "" when the run must go ahead
	}{
		{"home is the work tree", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			env := map[string]string{"HOME": wt, "PATH": "/usr/bin:/bin"}
			return &confine.Launcher{CallerEnv: lookup(env)}, shSpec(wt, "true")
		}, "config directory"},
		{"XDG_STATE_HOME in the work tree", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			env := map[string]string{"HOME": "/nonexistent", "XDG_STATE_HOME": filepath.Join(wt, "state"), "PATH": "/usr/bin:/bin"}
			return &confine.Launcher{CallerEnv: lookup(env)}, shSpec(wt, "true")
		}, "state directory"},
		{"the run's event log in the work tree", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			return &confine.Launcher{EventLog: filepath.Join(wt, "log", "events.jsonl")}, shSpec(wt, "true")
		}, "event log"},
		{"a named key file in a --rw root", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			rw := t.TempDir()
			s := shSpec(wt, "true")
			s.ReadWrite = []string{rw}
			return &confine.Launcher{ControlPaths: []string{filepath.Join(rw, "cap.key")}}, s
		}, "named by the launcher"},
		{"a writable root inside a control path", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			return &confine.Launcher{ControlPaths: []string{filepath.Dir(wt)}}, shSpec(wt, "true")
		}, "named by the launcher"},
		{"a read-only home: the key left out", func(wt string) (*confine.Launcher, spec.CommandSpec) {
			home := t.TempDir()
			key := filepath.Join(home, ".config", "confine", "cap.key")
			if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(key, []byte("secret"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, "notes"), []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"HOME": home, "PATH": "/usr/bin:/bin"}
			s := shSpec(wt, `cat "$1" >/dev/null && exit 0; if cat "$2/notes" >/dev/null; then exit 3; fi; exit 4`)
			s.Args = append(s.Args, "sh", key, home)
			s.ReadOnly = []string{home}
			return &confine.Launcher{CallerEnv: lookup(env)}, s
		}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wt := worktree(t)
			l, s := tt.setup(wt)
			res, err := l.RunCommand(context.Background(), c, s)
			if tt.refuse != "" {
				if !errors.Is(err, spec.ErrUnavailable) || !strings.Contains(err.Error(), "control plane") || !strings.Contains(err.Error(), tt.refuse) {
					t.Fatalf("err = %v; want ErrUnavailable naming the control plane's %s", err, tt.refuse)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != 3 {
				t.Fatalf("exit %d (0: the key was read, 4: the rest of the root was not granted either); stderr %s", res.ExitCode, res.Stderr.Head)
			}
		})
	}
}

func lookup(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := env[k]; return v, ok }
}
