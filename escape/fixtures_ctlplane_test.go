//go:build linux

package escape

import (
	"os"
	"path/filepath"
	"strings"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// ctlPlaneVectors are the rows of issue 21: a command reaching confine's
// own control plane (docs/control-plane.md). Each row runs under
// landlock+namespaces (--backend namespaces) and again as "-core" under
// the core; TestEscapeBwrap runs the first form under bubblewrap. A row
// is blocked when the attack fails or when confine refuses the run naming
// its control plane; a refusal for any other reason fails the row (the
// attack was never judged), except the namespaces backend being
// unavailable for the user, which skips it saying so.
func ctlPlaneVectors() []vcase {
	// server starts `confine serve` as the user with env added, at socket
	// ("" for the default socket env leads to); it is stopped with the
	// phase. It returns the socket and an effect-bearing job: a directory
	// outside the run and the file the server's run would create there.
	server := func(e *env, env []string, socket string) (sock, jobDir, target string) {
		s, err := testutil.StartServerAt(testutil.SelfBinary(e.t), e.user.UID, false, env, socket)
		if err != nil {
			e.t.Fatalf("start confine serve: %v", err)
		}
		e.t.Cleanup(s.Stop)
		jobDir = e.freshDir("job-")
		return s.Socket, jobDir, filepath.Join(jobDir, "made-by-the-server")
	}
	// privateDir is a fresh 0700 directory of the user's (a socket
	// directory must be).
	privateDir := func(e *env, parent, prefix string) string {
		d, err := os.MkdirTemp(parent, prefix)
		if err != nil {
			e.t.Fatal(err)
		}
		e.own(d, e.user.UID)
		if err := os.Chmod(d, 0o700); err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { _ = os.RemoveAll(d) })
		return d
	}
	serveRow := func(f fixture, sock, jobDir, target string) fixture {
		f.args = []string{sock, jobDir, target}
		f.effect = fx.Exists(target)
		return f
	}
	rows := []vcase{
		// The default socket ($TMPDIR/confine-UID/serve.sock without
		// XDG_RUNTIME_DIR) with the work directory as TMPDIR: /tmp's case,
		// without touching the host's own /tmp/confine-UID.
		{name: "ctl-serve-default-socket-workdir-is-tmpdir", vector: "serve-run", setup: func(e *env) fixture {
			tmp := []string{"TMPDIR=" + e.wd, "XDG_RUNTIME_DIR="}
			sock, job, target := server(e, tmp, "")
			return serveRow(fixture{env: tmp}, sock, job, target)
		}},
		// Work directory /tmp itself, the server's socket in a directory
		// of its own there that the launcher knows nothing of. The
		// persistence guard is waived: other tests make and remove
		// repositories in /tmp all the time, and the guard fails a launch
		// whose nested .git vanished between plan and mount (on purpose:
		// it never runs unguarded), which is not what this row attacks.
		{name: "ctl-serve-socket-workdir-tmp", vector: "serve-run", setup: func(e *env) fixture {
			dir := privateDir(e, "/tmp", "ctlsrv-")
			sock, job, target := server(e, nil, filepath.Join(dir, "serve.sock"))
			prof := e.file(e.wd, "waive-git.toml", 0o644)
			if err := os.WriteFile(prof, []byte("name = \"ctl-tmp\"\nwaive = [\"no-git-persistence\"]\n"), 0o644); err != nil {
				e.t.Fatal(err)
			}
			return serveRow(fixture{cliArgs: []string{"--workdir", "/tmp", "--profile", prof}}, sock, job, target)
		}},
		// --rw of the socket's directory, a --socket the launcher does not
		// know: only the server's own check stands.
		{name: "ctl-serve-socket-rw-of-its-dir", vector: "serve-run", setup: func(e *env) fixture {
			dir := privateDir(e, testutil.SharedDir(e.t), "srv-")
			sock, job, target := server(e, nil, filepath.Join(dir, "serve.sock"))
			return serveRow(fixture{cliArgs: []string{"--rw", dir}}, sock, job, target)
		}},
		// XDG_RUNTIME_DIR inside the work tree, as the run's caller has it.
		{name: "ctl-serve-xdg-runtime-dir-in-workdir", vector: "serve-run", setup: func(e *env) fixture {
			xdg := []string{"XDG_RUNTIME_DIR=" + privateDir(e, e.wd, "run-")}
			sock, job, target := server(e, xdg, "")
			return serveRow(fixture{env: xdg}, sock, job, target)
		}},
		// The same, the run's caller without XDG_RUNTIME_DIR (a server
		// started elsewhere): the launcher cannot know the socket.
		{name: "ctl-serve-xdg-runtime-dir-in-workdir-unknown", vector: "serve-run", setup: func(e *env) fixture {
			xdg := []string{"XDG_RUNTIME_DIR=" + privateDir(e, e.wd, "run-")}
			sock, job, target := server(e, xdg, "")
			return serveRow(fixture{}, sock, job, target)
		}},
		// Work directory $HOME (issue 21): the capability key and the
		// event log.
		{name: "ctl-read-cap-key-workdir-home", vector: "read-file", setup: func(e *env) fixture {
			key := e.file(e.wd, ".config/confine/cap.key", 0o600)
			return fixture{args: []string{key}, env: []string{"HOME=" + e.wd, "XDG_CONFIG_HOME="}}
		}},
		{name: "ctl-write-event-log-workdir-home", vector: "write-file", setup: func(e *env) fixture {
			log := e.file(e.wd, ".local/state/confine/events.jsonl", 0o600)
			return fixture{args: []string{log}, env: []string{"HOME=" + e.wd, "XDG_STATE_HOME="}, effect: contentChanged(log)}
		}},
		{name: "ctl-write-rotated-event-log-workdir-home", vector: "write-file", setup: func(e *env) fixture {
			log := e.file(e.wd, ".local/state/confine/events.jsonl.1", 0o600)
			return fixture{args: []string{log}, env: []string{"HOME=" + e.wd, "XDG_STATE_HOME="}, effect: contentChanged(log)}
		}},
		// Planting a key where the host's confine would take it as its own.
		{name: "ctl-plant-cap-key-workdir-home", vector: "write-file", setup: func(e *env) fixture {
			// The directory is there (the host made it); the key is not yet.
			key := filepath.Join(filepath.Dir(e.file(e.wd, ".config/confine/README", 0o644)), "cap.key")
			return fixture{args: []string{key}, env: []string{"HOME=" + e.wd, "XDG_CONFIG_HOME="}, effect: fx.Exists(key)}
		}},
		// $HOME granted read-only (--ro): the key is left out of the grant.
		{name: "ctl-read-cap-key-ro-home", vector: "read-file", setup: func(e *env) fixture {
			home := e.freshDir("home-")
			key := e.file(home, ".config/confine/cap.key", 0o600)
			e.file(home, ".config/other/settings", 0o644)
			return fixture{args: []string{key}, env: []string{"HOME=" + home, "XDG_CONFIG_HOME="}, cliArgs: []string{"--ro", home}}
		}},
	}
	all := make([]vcase, 0, 2*len(rows))
	for _, r := range rows {
		c := r
		c.name += "-core"
		c.setup = ctlBackend(r.setup, "core")
		r.setup = ctlBackend(r.setup, "namespaces")
		all = append(all, r, c)
	}
	return all
}

// ctlBackend runs a control-plane row's confined phase under backend
// (TestEscape) or bubblewrap (TestEscapeBwrap, the namespaces form only),
// and judges it: escaped when the probe says so and the harness sees the
// effect; a refusal must name confine's control plane.
func ctlBackend(setup func(e *env) fixture, backend string) func(e *env) fixture {
	return func(e *env) fixture {
		if e.confined && e.backend == "bwrap" && backend == "core" {
			e.t.Skip("the core's form of this row runs in TestEscape; TestEscapeBwrap runs the row once, under bubblewrap")
		}
		f := setup(e)
		if !e.confined {
			return f
		}
		if e.backend == "" {
			f.cliArgs = append(f.cliArgs, "--backend", backend)
		}
		f.mayRefuse = true
		effect := f.effect
		f.judge = func(o outcome) (bool, string) {
			if o.code == 125 && !o.hasReport {
				switch {
				case strings.Contains(o.stderr, "control plane"):
					return false, "confine refused the run: " + fx.OneLine(o.stderr, 300)
				case strings.Contains(o.stderr, "unavailable") && backend == "namespaces" && e.backend == "":
					e.t.Skipf("not applicable as %s: the namespaces backend is unavailable: %s", e.user.Name, fx.OneLine(o.stderr, 300))
				}
				e.t.Fatalf("confine refused the run for another reason than its control plane, so the attack was never judged: %s", o.stderr)
			}
			escaped := o.hasReport && o.report.Outcome == "escaped"
			why := o.brief()
			if effect != nil {
				if ok, d := effect(); ok {
					escaped, why = true, why+"; harness saw: "+d
				}
			}
			return escaped, why
		}
		return f
	}
}
