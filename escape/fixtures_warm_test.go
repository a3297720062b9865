//go:build linux

package escape

import (
	"os"
	"path/filepath"
	"runtime"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// warmVectors attack what a server keeps between runs from inside one of
// its runs: the confined phase goes through `confine serve` (--server),
// started as the row's user for the row, under the backend the server
// selects (landlock+namespaces where namespaces work, else the core). A
// server of root gives each namespaced run's init a network namespace made
// ahead (nsinit.NetPool, docs/performance-launch.md); an unprivileged one
// cannot make them, and its runs get their own from the clone: the rows
// hold either way.
func warmVectors() []vcase {
	// viaServer sends f's confined run through a server of the user's.
	viaServer := func(e *env, f fixture) fixture {
		if !e.confined {
			return f
		}
		dir, err := os.MkdirTemp("", "confine-escape-sock-")
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = os.RemoveAll(dir) })
		e.own(dir, e.user.UID)
		if err := os.Chmod(dir, 0o700); err != nil {
			e.t.Fatal(err)
		}
		s, err := testutil.StartServerAt(testutil.SelfBinary(e.t), e.user.UID, false, nil, filepath.Join(dir, "serve.sock"))
		if err != nil {
			e.t.Fatalf("start confine serve: %v", err)
		}
		e.t.Cleanup(s.Stop)
		f.cliArgs = append(f.cliArgs, "--server", s.Socket)
		return f
	}
	return []vcase{
		// The host's abstract unix socket, from a run whose network
		// namespace the server made ahead: the namespace is not the
		// server's (it made it with unshare on a thread of its own and
		// moved only the clone into it).
		{name: "warm-netns-abstract-unix", vector: "abstract-unix", setup: func(e *env) fixture {
			name := fx.RandName("confine-escape-")
			r := e.unixListener("@" + name)
			return viaServer(e, fixture{args: []string{name}, effect: e.await(r)})
		}},
		// A descriptor of a network namespace other than the run's own
		// (the server's, or one of its pool's) reaching the command. The
		// control is handed one (a namespace made as the pool makes them)
		// and finds it.
		{name: "warm-netns-fd", vector: "netns-fd", setup: func(e *env) fixture {
			if e.confined {
				return viaServer(e, fixture{})
			}
			p, err := nsinit.NewNetPool()
			if err != nil {
				e.t.Skipf("not applicable as %s: this test process cannot make the control's network namespace: %v", e.user.Name, err)
			}
			e.t.Cleanup(p.Close)
			ns := p.Take()
			for ns == nil {
				runtime.Gosched() // the pool's maker is at work
				ns = p.Take()
			}
			e.t.Cleanup(func() { ns.Close() })
			return fixture{extra: []*os.File{ns}}
		}},
	}
}
