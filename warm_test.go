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
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// Runs of a Launcher with a Warm, on every backend this host selects,
// each get a private directory no run had before, empty, of mode 0700,
// whatever the run before left in its own, and the directories made
// ahead are gone once the Warm is closed.
func TestWarmPrivateDirs(t *testing.T) {
	_, c := mint(t, "default", 0)
	parent := t.TempDir()
	t.Setenv("TMPDIR", parent)
	for _, backend := range []string{"", "core"} {
		t.Run("backend="+backend, func(t *testing.T) {
			w := confine.NewWarm()
			l := &confine.Launcher{Warm: w, Backend: backend}
			wt := worktree(t)
			seen := map[string]bool{}
			for i := range 4 {
				res, err := l.RunCommand(context.Background(), c, shSpec(wt,
					`ls -A "$HOME" "$TMPDIR"; stat -c %a "$HOME/.."; echo planted > "$HOME/.profile"; echo x > "$TMPDIR/f"; echo "$HOME"`))
				if err != nil {
					t.Fatal(err)
				}
				lines := strings.Split(strings.TrimSpace(res.Stdout.Text()), "\n")
				if res.ExitCode != 0 || len(lines) < 2 {
					t.Fatalf("run %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, res.Stdout.Text(), res.Stderr.Text())
				}
				home, mode := lines[len(lines)-1], lines[len(lines)-2]
				for _, l := range lines[:len(lines)-2] {
					if l != "" && !strings.HasSuffix(l, ":") {
						t.Fatalf("run %d found %q in its fresh HOME or TMPDIR: %q", i, l, lines)
					}
				}
				if mode != "700" {
					t.Errorf("run %d: its private directory has mode %s, want 700", i, mode)
				}
				if seen[home] {
					t.Fatalf("run %d got HOME %s, which an earlier run had", i, home)
				}
				seen[home] = true
				if !strings.HasPrefix(home, parent+"/") {
					t.Errorf("run %d: HOME %s is not under the caller's TMPDIR %s", i, home, parent)
				}
			}
			w.Close()
			left, _ := filepath.Glob(filepath.Join(parent, "confine-*"))
			for _, d := range left {
				// A detached run's init may still be removing its own.
				if _, err := os.Stat(filepath.Join(d, "home", ".profile")); err != nil {
					t.Errorf("%s is left after Close, and no run used it", d)
				}
			}
		})
	}
}

// Namespaced runs of a Launcher with a Warm each get a network namespace
// of their own, never the launcher's nor one an earlier run had: made
// ahead by a root launcher (nsinit.NetPool), by the clone otherwise.
func TestWarmNetworkNamespaces(t *testing.T) {
	if testutil.SimulatingContainer() {
		t.Skip("not applicable: the simulated container refuses namespaces (Docker's seccomp profile), so there is no namespaces backend to ask for")
	}
	if err := confine.ProbeNamespaces(context.Background()); err != nil {
		t.Skipf("not applicable: namespaced runs do not work for this uid on this host: %v", err)
	}
	_, c := mint(t, "default", 0)
	w := confine.NewWarm()
	defer w.Close()
	l := &confine.Launcher{Warm: w, Backend: "namespaces"}
	wt := worktree(t)
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{own: true}
	for i := range 4 {
		res, err := l.RunCommand(context.Background(), c, shSpec(wt, `readlink /proc/self/ns/net`))
		if err != nil {
			if errors.Is(err, spec.ErrUnavailable) {
				t.Skipf("the namespaces backend is unavailable here: %v", err)
			}
			t.Fatal(err)
		}
		ns := strings.TrimSpace(res.Stdout.Text())
		if res.ExitCode != 0 || !strings.HasPrefix(ns, "net:[") {
			t.Fatalf("run %d: exit %d, stdout %q, stderr %q", i, res.ExitCode, res.Stdout.Text(), res.Stderr.Text())
		}
		if seen[ns] {
			t.Fatalf("run %d is in network namespace %s: the launcher's (%s) or an earlier run's", i, ns, own)
		}
		seen[ns] = true
	}
}
