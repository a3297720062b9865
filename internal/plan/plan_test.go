package plan

import (
	"bytes"
	"strings"
	"testing"
)

// A plan names its backend, and the name must agree with the plan's
// namespaces section; a received plan that does not is refused.
func TestCheckBackend(t *testing.T) {
	ns := &Namespaces{Hostname: "confine"}
	bw := &Namespaces{Hostname: "confine", Bwrap: "/usr/bin/bwrap"}
	for _, tt := range []struct {
		name    string
		backend Backend
		ns      *Namespaces
		want    string // "": accepted
	}{
		{"core", BackendCore, nil, ""},
		{"namespaces", BackendNamespaces, ns, ""},
		{"bubblewrap", BackendBwrap, bw, ""},
		{"no backend", "", nil, "unknown backend"},
		{"unknown backend", "firecracker", nil, "unknown backend"},
		{"core with namespaces", BackendCore, ns, "does not use"},
		{"namespaces without them", BackendNamespaces, nil, "does not use"},
		{"namespaces with bwrap", BackendNamespaces, bw, "does not use"},
		{"bubblewrap without bwrap", BackendBwrap, ns, "does not use"},
		{"bubblewrap without namespaces", BackendBwrap, nil, "does not use"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := &Plan{Backend: tt.backend, Namespaces: tt.ns}
			err := p.CheckBackend()
			var buf bytes.Buffer
			if werr := Write(&buf, p); werr != nil {
				t.Fatal(werr)
			}
			_, rerr := Read(&buf)
			if tt.want == "" {
				if err != nil || rerr != nil {
					t.Fatalf("refused: %v; Read: %v", err, rerr)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("CheckBackend = %v, want %q", err, tt.want)
			}
			if rerr == nil || !strings.Contains(rerr.Error(), tt.want) {
				t.Fatalf("Read = %v, want %q", rerr, tt.want)
			}
		})
	}
}

// Each backend's traits agree with CheckBackend and LandlockGuarded: a
// backend is namespaced exactly when its plan needs a namespaces section,
// and Landlock keeps the guarded paths only where it is not. An unknown
// backend has no traits.
func TestBackendTraits(t *testing.T) {
	for b := range backendTraits {
		t.Run(string(b), func(t *testing.T) {
			p := &Plan{Backend: b, Guarded: []string{"/w/.git"}}
			if err := p.CheckBackend(); (err == nil) == b.Namespaced() {
				t.Errorf("Namespaced() = %v, but a plan without a namespaces section: %v", b.Namespaced(), err)
			}
			if got := len(p.LandlockGuarded()) > 0; got == b.Namespaced() {
				t.Errorf("Namespaced() = %v, but LandlockGuarded() = %q", b.Namespaced(), p.LandlockGuarded())
			}
		})
	}
	for _, b := range []Backend{"", "firecracker"} {
		if b.Namespaced() || b.RefusesNames() {
			t.Errorf("unknown backend %q: Namespaced() = %v, RefusesNames() = %v", b, b.Namespaced(), b.RefusesNames())
		}
	}
}

// Only the core's plan sends the calls that name another process to the
// supervisor: in a PID namespace the kernel resolves them within the run,
// and a plan that asks otherwise is refused, so that the filter is built
// from the plan's section as it is.
func TestCheckBackendProcCalls(t *testing.T) {
	ns := &Namespaces{Hostname: "confine"}
	bw := &Namespaces{Hostname: "confine", Bwrap: "/usr/bin/bwrap"}
	for _, sc := range []Seccomp{{NotifyProcTargets: true}, {NotifySignals: true}} {
		for _, tt := range []struct {
			backend Backend
			ns      *Namespaces
			ok      bool
		}{{BackendCore, nil, true}, {BackendNamespaces, ns, false}, {BackendBwrap, bw, false}} {
			p := &Plan{Backend: tt.backend, Namespaces: tt.ns, Seccomp: sc}
			if err := p.CheckBackend(); (err == nil) != tt.ok {
				t.Errorf("%s with %+v: CheckBackend = %v", tt.backend, sc, err)
			}
		}
	}
}
