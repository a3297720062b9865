//go:build linux

package hostop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

func TestHostGating(t *testing.T) {
	e, err := policy.NewEngine()
	must(t, err)
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("x\n"), 0o644))
	logPath := filepath.Join(t.TempDir(), "events.jsonl")
	open := func(profile string) *Host {
		c, err := e.MintHostOp(profile, "test", 0)
		must(t, err)
		h, err := NewHost(c, dir)
		must(t, err)
		h.EventLog = logPath
		h.EventLogError = func(err error) { t.Error(err) }
		t.Cleanup(func() { h.Close() })
		return h
	}
	ro := open("host-readonly")
	if _, err := ro.ReadFile("f", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ro.WriteFile("f", []byte("y"), WriteOptions{}); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("read-only profile wrote: %v", err)
	}
	if _, err := ro.ApplyPatch([]byte("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n"), 0); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("read-only profile patched: %v", err)
	}
	rw := open("host")
	if _, err := rw.ApplyPatch([]byte("--- a/f\n+++ b/f\n@@ -1 +1 @@\n-x\n+y\n"), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := rw.Search(t.Context(), ".", "(", SearchOptions{}); !errors.Is(err, ErrPattern) {
		t.Fatalf("bad pattern: %v", err)
	}
	if _, err := NewHost(nil, dir); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("nil capability: %v", err)
	}
	evs, err := eventlog.ReadLast(logPath, 10)
	must(t, err)
	if len(evs) != 5 {
		t.Fatalf("%d events, want 5: %+v", len(evs), evs)
	}
	for i, want := range []struct{ op, errSub string }{{"read_file", ""}, {"write_file", "does not allow"}, {"apply_patch", "does not allow"}, {"apply_patch", ""}, {"search", "bad search pattern"}} {
		ev := evs[i]
		if want.op == "apply_patch" && want.errSub == "" && (len(ev.Argv) != 2 || ev.Argv[1] != "f") {
			t.Errorf("patch event names %v, want [apply_patch f]", ev.Argv)
		}
		if ev.Argv[0] != want.op || ev.Backend != Backend || ev.Tier != 1 || (want.errSub == "") != (ev.Error == "") {
			t.Errorf("event %d: %+v, want op %s error %q", i, ev, want.op, want.errSub)
		}
	}
}
