//go:build linux

package launch

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/rlimit"
	"github.com/confine-sandbox/confine/spec"
)

// testPlan is a minimal plan for sh -c script in a fresh directory, with
// namespaces set as the landlock+namespaces provider sets them.
func testPlan(t *testing.T, script string) *plan.Plan {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	uids, gids, setgroups := nsinit.Mappings(os.Geteuid(), os.Getegid(), -1, -1)
	abi := host.Probe().LandlockABI
	return &plan.Plan{
		Backend: plan.BackendNamespaces,
		Path:    "/bin/sh",
		Argv:    []string{"sh", "-c", script},
		Env:     []string{"PATH=/usr/bin:/bin"},
		Dir:     dir,
		Rlimits: rlimit.FromLimits(spec.Limits{}.WithDefaults()),
		UID:     -1,
		GID:     -1,
		Landlock: plan.Landlock{
			ReadExec:  landlock.DefaultSystemReadExec(),
			ReadWrite: []string{dir},
			Devices:   landlock.DefaultDevices(),
			Optional:  append(landlock.DefaultSystemReadExec(), landlock.DefaultDevices()...),
			DenyTCP:   abi >= 4,
			Scope:     abi >= 6,
		},
		Seccomp:       plan.Seccomp{Arch: plan.Arch(runtime.GOARCH), NotifyMetadata: true, NotifyConnect: true},
		WritableRoots: []string{dir},
		WallTime:      spec.DefaultLimits().WallTime,
		KillGrace:     spec.DefaultLimits().KillGrace,
		Namespaces: &plan.Namespaces{
			UIDs: uids, GIDs: gids, Setgroups: setgroups,
			Private:    nsinit.DefaultPrivate(),
			TmpfsBytes: 1 << 20, Hostname: nsinit.Hostname,
		},
	}
}

func needUserNS(t *testing.T) {
	if h := host.Probe(); !h.UserNS {
		t.Skipf("not applicable on this host: user namespaces unavailable (%s)", h.UserNSErr)
	}
}

func TestMain(m *testing.M) {
	Init()
	os.Exit(m.Run())
}

// A program that never dispatched is refused: its re-executions as a
// run's helpers would otherwise run its own main.
func TestRunNeedsInit(t *testing.T) {
	dispatched.Store(false)
	defer dispatched.Store(true)
	_, err := Run(context.Background(), &plan.Plan{}, Fallback{}, IO{})
	if !errors.Is(err, ErrNoInit) || !errors.Is(err, spec.ErrLaunch) {
		t.Fatalf("err = %v, want ErrNoInit", err)
	}
}

// The command's status crosses the PID namespace's init exactly: exit
// codes, and signals the init could not re-raise on itself.
func TestNamespacesStatus(t *testing.T) {
	needUserNS(t)
	for _, tt := range []struct {
		script       string
		code, signal int
	}{
		{"exit 0", 0, 0},
		{"exit 3", 3, 0},
		{"exit 255", 255, 0},
		{"kill -TERM $$", -1, 15},
		{"kill -INT $$", -1, 2},
		{"kill -KILL $$", -1, 9},
	} {
		out, err := Run(context.Background(), testPlan(t, tt.script), Fallback{Required: true}, IO{OutputLimit: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		r := out.Report
		if !r.Namespaces || r.StartErr != "" || r.ExitCode != tt.code || r.Signal != tt.signal {
			t.Errorf("%q: namespaces %v exit %d signal %d (%s), want exit %d signal %d", tt.script, r.Namespaces, r.ExitCode, r.Signal, r.StartErr, tt.code, tt.signal)
		}
	}
}

// A namespace set-up that fails (here: a host name the kernel refuses)
// runs the fallback plan the caller built, never an edit of the first one,
// and says why; without a fallback the run is refused with the reason.
func TestNamespacesFallBack(t *testing.T) {
	needUserNS(t)
	p := testPlan(t, "echo ran")
	p.Namespaces.Hostname = strings.Repeat("x", 100)
	core := testPlan(t, "echo core ran")
	core.Backend, core.Namespaces = plan.BackendCore, nil
	before := *p.Namespaces
	out, err := Run(context.Background(), p, Fallback{Plan: core}, IO{OutputLimit: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Report
	if r.Namespaces || !strings.Contains(r.NamespacesSkipped, "sethostname") || r.ExitCode != 0 || string(out.Stdout.Head) != "core ran\n" || out.Ran != core {
		t.Fatalf("fallback: namespaces %v skipped %q exit %d stdout %q start %q", r.Namespaces, r.NamespacesSkipped, r.ExitCode, out.Stdout.Head, r.StartErr)
	}
	if p.Namespaces == nil || !reflect.DeepEqual(*p.Namespaces, before) {
		t.Fatal("the first plan was edited")
	}

	for _, tt := range []struct {
		fb   Fallback
		want string
	}{
		{Fallback{Required: true}, "requires namespaces"},
		{Fallback{Refusal: "the core cannot take over: no-foreign-signals needs X"}, "no-foreign-signals needs X"},
	} {
		out, err = Run(context.Background(), p, tt.fb, IO{OutputLimit: 1 << 10})
		if err != nil {
			t.Fatal(err)
		}
		r = out.Report
		if r.StartCode != 125 || !strings.Contains(r.StartErr, tt.want) || !strings.Contains(r.StartErr, "sethostname") || out.Stdout.Total != 0 {
			t.Fatalf("%+v: start %d %q, stdout %q", tt.fb, r.StartCode, r.StartErr, out.Stdout.Head)
		}
	}
}

// Nothing writes to a plan once it is built: a run under each backend
// leaves the plan it was given, and its fallback, exactly as they were.
func TestRunLeavesThePlanAlone(t *testing.T) {
	for _, backend := range []plan.Backend{plan.BackendCore, plan.BackendNamespaces, plan.BackendBwrap} {
		t.Run(string(backend), func(t *testing.T) {
			p := testPlan(t, "echo ran")
			switch backend {
			case plan.BackendCore:
				p.Backend, p.Namespaces = plan.BackendCore, nil
			case plan.BackendNamespaces:
				needUserNS(t)
			case plan.BackendBwrap:
				h := host.ProbeBwrap(host.Probe())
				if ok, why := h.Bwrap != "" && h.BwrapErr == "", h.BwrapErr; !ok {
					t.Skipf("not applicable on this host: bubblewrap cannot run here (%q, %s)", h.Bwrap, why)
				}
				p.Backend = plan.BackendBwrap
				p.Namespaces = &plan.Namespaces{Private: nsinit.DefaultPrivate(), TmpfsBytes: 1 << 20, Hostname: nsinit.Hostname, Bwrap: h.Bwrap}
			}
			fb := testPlan(t, "echo fallback ran")
			fb.Backend, fb.Namespaces = plan.BackendCore, nil
			before, beforeFB := deepCopy(p), deepCopy(fb)
			out, err := Run(context.Background(), p, Fallback{Plan: fb}, IO{OutputLimit: 1 << 10})
			if err != nil {
				t.Fatal(err)
			}
			if string(out.Stdout.Head) != "ran\n" || out.Ran != p {
				t.Fatalf("stdout %q (start %q), ran the fallback: %v", out.Stdout.Head, out.Report.StartErr, out.Ran == fb)
			}
			if !reflect.DeepEqual(p, before) {
				t.Errorf("the plan changed during the run:\nbefore %s\nafter  %s", mustJSON(t, before), mustJSON(t, p))
			}
			if !reflect.DeepEqual(fb, beforeFB) {
				t.Errorf("the fallback plan changed during the run:\nbefore %s\nafter  %s", mustJSON(t, beforeFB), mustJSON(t, fb))
			}
		})
	}
}

// The comparison above sees a write through any alias: a copy shares no
// slice, map or pointer with the plan it was taken from.
func TestDeepCopyIsDeep(t *testing.T) {
	for name, write := range map[string]func(p *plan.Plan){
		"slice element":  func(p *plan.Plan) { p.Landlock.ReadWrite[0] = "/elsewhere" },
		"pointed struct": func(p *plan.Plan) { p.Namespaces.Hostname = "other" },
		"nested slice":   func(p *plan.Plan) { p.Argv[0] = "bash" },
	} {
		p := testPlan(t, "true")
		c := deepCopy(p)
		if !reflect.DeepEqual(p, c) {
			t.Fatalf("%s: the copy differs before any write", name)
		}
		write(p)
		if reflect.DeepEqual(p, c) {
			t.Errorf("%s: a write to the plan shows in its copy", name)
		}
	}
}

// deepCopy copies p and everything it reaches (pointers, slices, maps),
// so that a write through any alias the run holds shows as a difference.
func deepCopy(p *plan.Plan) *plan.Plan {
	return copyValue(reflect.ValueOf(p)).Interface().(*plan.Plan)
}

func copyValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		c := reflect.New(v.Elem().Type())
		c.Elem().Set(copyValue(v.Elem()))
		return c
	case reflect.Struct:
		c := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if !c.Field(i).CanSet() {
				panic("plan has an unexported field " + v.Type().Field(i).Name + ": copy it here")
			}
			c.Field(i).Set(copyValue(v.Field(i)))
		}
		return c
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			c.Index(i).Set(copyValue(v.Index(i)))
		}
		return c
	case reflect.Map:
		if v.IsNil() {
			return v
		}
		c := reflect.MakeMapWithSize(v.Type(), v.Len())
		for it := v.MapRange(); it.Next(); {
			c.SetMapIndex(it.Key(), copyValue(it.Value()))
		}
		return c
	case reflect.Interface, reflect.Func, reflect.Chan, reflect.UnsafePointer:
		if !v.IsNil() {
			panic("plan holds a " + v.Kind().String() + ": deepCopy cannot copy it")
		}
	}
	return v
}

func mustJSON(t *testing.T, p *plan.Plan) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
