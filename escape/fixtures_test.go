//go:build linux

package escape

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// original is the content of every fixture file the attacks try to change.
const original = "original fixture content\n"

// own gives path to the user (uid:gid) when the test runs as root.
func (e *env) own(path string, gid int) {
	e.t.Helper()
	if os.Geteuid() != 0 {
		return
	}
	if err := os.Lchown(path, e.user.UID, gid); err != nil {
		e.t.Fatal(err)
	}
}

// secondGroup is a supplementary group of the unprivileged harness other
// than its own: a fixture that needs a file of a foreign group is not
// applicable without one (e.g. docker run --user 1000:1000).
func (e *env) secondGroup() int {
	e.t.Helper()
	gs, err := os.Getgroups()
	if err == nil {
		for _, g := range gs {
			if g != os.Getegid() {
				return g
			}
		}
	}
	e.t.Skipf("not applicable as uid %d: the harness is not root and has no second group to give the victim a foreign group (groups %v, %v)", os.Geteuid(), gs, err)
	return 0
}

// freshDir makes a new 0755 directory under SharedDir owned by the user;
// nothing grants it to a confined run unless the fixture says so.
func (e *env) freshDir(prefix string) string {
	e.t.Helper()
	d, err := os.MkdirTemp(testutil.SharedDir(e.t), prefix)
	if err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(d, 0o755); err != nil {
		e.t.Fatal(err)
	}
	e.own(d, e.user.UID)
	e.t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// outside is this phase's "outside" directory: not the work directory, not
// granted, owned by the user so that the control may change it.
func (e *env) outside() string {
	if e.out == "" {
		e.out = e.freshDir("out-")
	}
	return e.out
}

// file writes original into dir/name, owned by the user, and returns it.
func (e *env) file(dir, name string, mode os.FileMode) string {
	e.t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(original), mode); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		e.t.Fatal(err)
	}
	for d := filepath.Dir(p); d != dir && strings.HasPrefix(d, dir); d = filepath.Dir(d) {
		e.own(d, e.user.UID)
	}
	e.own(p, e.user.UID)
	return p
}

// symlink makes link -> target, owned by the user.
func (e *env) symlink(target, link string) {
	e.t.Helper()
	if err := os.Symlink(target, link); err != nil {
		e.t.Fatal(err)
	}
	e.own(link, e.user.UID)
}

func (e *env) outsideFile(name string) string { return e.file(e.outside(), name, 0o644) }

// contentChanged is the effect "the file no longer holds original".
func contentChanged(path string) fx.Effect { return fx.ContentChanged(path, original) }

func statOf(path string) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Lstat(path, &st)
	return st, err
}

// await is the effect "the listener got something", polled for the
// phase's settle time.
func (e *env) await(r *fx.Recorder) fx.Effect { return r.Await(e.settle()) }

// tcpListener listens on 127.0.0.1 (or [::1]) and returns the port.
func (e *env) tcpListener(network, addr string) (int, *fx.Recorder, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return 0, nil, err
	}
	return ln.Addr().(*net.TCPAddr).Port, fx.StreamListener(ln, e.t.Cleanup), nil
}

func (e *env) tcp4() (string, *fx.Recorder) {
	e.t.Helper()
	port, r, err := e.tcpListener("tcp4", "127.0.0.1:0")
	if err != nil {
		e.t.Fatalf("listen on 127.0.0.1: %v", err)
	}
	return strconv.Itoa(port), r
}

// unixListener makes a pathname (or, with "@name", abstract) stream socket
// the user may connect to.
func (e *env) unixListener(path string) *fx.Recorder {
	e.t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		e.t.Fatalf("listen on %s: %v", path, err)
	}
	if !strings.HasPrefix(path, "@") {
		if err := os.Chmod(path, 0o777); err != nil {
			e.t.Fatal(err)
		}
	}
	return fx.StreamListener(ln, e.t.Cleanup)
}

// canary is the secret planted in victim processes' environments.
const canary = "CONFINE_CANARY_SECRET=canary-5f3d1c0e"

// startSleep starts a victim as the user, with the canary.
func (e *env) startSleep() *fx.Victim {
	e.t.Helper()
	uid := -1
	if os.Geteuid() == 0 {
		uid = e.user.UID
	}
	v, err := fx.StartSleep([]string{controlPATH, canary}, uid, false, e.t.Cleanup)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

// openPTY opens a pseudo-terminal whose slave the user owns.
func (e *env) openPTY() *fx.PTY {
	e.t.Helper()
	owner := -1
	if os.Geteuid() == 0 {
		owner = e.user.UID
	}
	p, err := fx.OpenPTY(owner, e.t.Cleanup)
	if u := (*fx.Unavailable)(nil); errors.As(err, &u) {
		e.t.Skipf("not applicable on this host as %s: %s", e.user.Name, u.Reason)
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// envJudge parses an env-dump report: escaped when a loader variable is
// set or a path-list variable names the work directory.
func envJudge(wd string) func(o outcome) (bool, string) {
	return func(o outcome) (bool, string) {
		if !o.hasReport {
			return false, "no environment reported: " + o.brief()
		}
		_, vars, ok := strings.Cut(o.report.Detail, ":\n")
		if !ok {
			return false, "no variable list in the report: " + o.brief()
		}
		var bad, path []string
		for _, kv := range strings.Split(vars, "\n") {
			k, v, _ := strings.Cut(kv, "=")
			switch {
			case k == "PATH":
				path = append(path, v)
				fallthrough
			case k == "LD_LIBRARY_PATH", k == "PYTHONPATH", k == "NODE_PATH":
				for _, c := range strings.Split(v, ":") {
					if c == "" || c == "." || !filepath.IsAbs(c) || c == wd || strings.HasPrefix(c, wd+"/") {
						bad = append(bad, fmt.Sprintf("%s has component %q", k, c))
					}
				}
			case strings.HasPrefix(k, "LD_"), strings.HasPrefix(k, "DYLD_"), k == "SSH_AUTH_SOCK",
				strings.HasPrefix(k, "AWS_"), strings.HasPrefix(k, "CONFINE_CANARY"):
				bad = append(bad, kv)
			}
		}
		if len(bad) > 0 {
			return true, strings.Join(bad, "; ")
		}
		return false, fmt.Sprintf("no loader variable, no workdir on a path list (PATH=%s)", strings.Join(path, ","))
	}
}

// credentialFiles are the files a --ro grant must not expose (policy
// issue 4: credential re-deny).
var credentialFiles = []string{
	".cargo/credentials.toml", ".npmrc", ".netrc", ".pypirc", ".git-credentials",
	".docker/config.json", ".config/gh/hosts.yml", ".aws/credentials", ".ssh/id_ed25519",
}

func vectors() []vcase {
	// Network (R5 and the rest of guarantee 1).
	cases := []vcase{
		{name: "tcp-connect", vector: "tcp-connect", setup: func(e *env) fixture {
			port, r := e.tcp4()
			return fixture{args: []string{port}, effect: e.await(r)}
		}},
		{name: "r5-postinstall-tcp", vector: "tcp-connect", setup: func(e *env) fixture {
			port, r := e.tcp4()
			script := filepath.Join(e.wd, "postinstall.sh")
			body := fmt.Sprintf("#!/bin/sh\n# a dependency's install hook phoning home\n%q tcp-connect %s\n", probePath, port)
			if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
				e.t.Fatal(err)
			}
			e.own(script, e.user.UID)
			return fixture{command: []string{"sh", "-c", "sh ./postinstall.sh"}, effect: e.await(r)}
		}},
		{name: "tcp6-connect", vector: "tcp6-connect", setup: func(e *env) fixture {
			port, r, err := e.tcpListener("tcp6", "[::1]:0")
			if err != nil {
				e.t.Skipf("not applicable on this host as %s: cannot listen on [::1]: %v", e.user.Name, err)
			}
			return fixture{args: []string{strconv.Itoa(port)}, effect: e.await(r)}
		}},
		{name: "udp-send", vector: "udp-send", setup: func(e *env) fixture {
			pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				e.t.Fatal(err)
			}
			r := fx.PacketListener(pc, e.t.Cleanup)
			return fixture{args: []string{strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)}, effect: e.await(r)}
		}},
		{name: "tcp-listen", vector: "tcp-listen", setup: func(*env) fixture { return fixture{} }},
		{name: "mptcp-connect", vector: "mptcp-connect", setup: func(e *env) fixture {
			port, r := e.tcp4()
			return fixture{args: []string{port}, effect: e.await(r)}
		}},
		{name: "netlink", vector: "netlink", setup: func(*env) fixture { return fixture{} }},
		{name: "vsock", vector: "vsock", setup: func(*env) fixture { return fixture{} }},
		{name: "packet", vector: "packet", setup: func(*env) fixture { return fixture{} }},
		{name: "iouring-socket", vector: "iouring-socket", setup: func(e *env) fixture {
			port, r := e.tcp4()
			return fixture{args: []string{port}, effect: e.await(r)}
		}},
		{name: "iouring-openat-outside", vector: "iouring-openat", setup: func(e *env) fixture {
			return fixture{args: []string{e.outsideFile("secret.txt")}}
		}},
		{name: "iouring-openat-shadow", vector: "iouring-openat", setup: func(*env) fixture {
			return fixture{args: []string{"/etc/shadow"}}
		}},
		{name: "socketcall32", vector: "socketcall32", setup: func(e *env) fixture {
			port, r := e.tcp4()
			return fixture{args: []string{port}, effect: e.await(r)}
		}},
		{name: "x32-syscall", vector: "x32-syscall", setup: func(e *env) fixture {
			port, r := e.tcp4()
			return fixture{args: []string{port}, effect: e.await(r)}
		}},
		{name: "abstract-unix", vector: "abstract-unix", setup: func(e *env) fixture {
			name := fx.RandName("confine-escape-")
			r := e.unixListener("@" + name)
			return fixture{args: []string{name}, effect: e.await(r)}
		}},
		{name: "unix-connect-outside", vector: "unix-connect", setup: func(e *env) fixture {
			// Think /var/run/docker.sock: a pathname socket outside the run.
			path := filepath.Join(e.outside(), "docker.sock")
			r := e.unixListener(path)
			return fixture{args: []string{path}, effect: e.await(r)}
		}},
		{name: "unix-dgram-outside", vector: "unix-dgram", setup: func(e *env) fixture {
			path := filepath.Join(e.outside(), "log.sock")
			pc, err := net.ListenPacket("unixgram", path)
			if err != nil {
				e.t.Fatal(err)
			}
			if err := os.Chmod(path, 0o777); err != nil {
				e.t.Fatal(err)
			}
			r := fx.PacketListener(pc, e.t.Cleanup)
			return fixture{args: []string{path}, effect: e.await(r)}
		}},
	}

	// Inherited descriptors: the launching process holds a pipe's write end.
	for _, fd := range []int{3, 9} {
		cases = append(cases, vcase{name: fmt.Sprintf("inherited-fd-%d", fd), vector: "inherited-fd", setup: func(e *env) fixture {
			r, w, err := os.Pipe()
			if err != nil {
				e.t.Fatal(err)
			}
			e.t.Cleanup(func() { r.Close(); w.Close() })
			extra := make([]*os.File, fd-2)
			extra[fd-3] = w
			got := make(chan string, 1)
			go func() {
				buf := make([]byte, 64)
				n, _ := r.Read(buf) // returns at EOF: every write end closed
				got <- string(buf[:max(n, 0)])
			}()
			var seen *string
			return fixture{args: []string{strconv.Itoa(fd)}, extra: extra, effect: func() (bool, string) {
				if seen == nil {
					w.Close() // the test's own copy: EOF once the run's copies are gone
					var s string
					select {
					case s = <-got:
					case <-time.After(10 * time.Second):
						s = ""
					}
					seen = &s
				}
				if *seen != "" {
					return true, fmt.Sprintf("the pipe behind fd %d received %q", fd, *seen)
				}
				return false, fmt.Sprintf("the pipe behind fd %d received nothing", fd)
			}}
		}})
	}

	// Other processes (guarantee 4).
	cases = append(cases,
		vcase{name: "kill", vector: "kill", setup: func(e *env) fixture {
			tg := e.startSleep()
			return fixture{args: []string{strconv.Itoa(tg.Pid)}, effect: tg.Ended(e.settle()), intact: tg.Check}
		}},
		vcase{name: "ptrace", vector: "ptrace", setup: func(e *env) fixture {
			tg := e.startSleep()
			return fixture{args: []string{strconv.Itoa(tg.Pid)}, intact: tg.Check}
		}},
		vcase{name: "process-vm-readv", vector: "process-vm-readv", setup: func(e *env) fixture {
			tg := e.startSleep()
			addr, err := tg.FirstMapping(controlPATH)
			if err != nil {
				e.t.Fatal(err)
			}
			return fixture{args: []string{strconv.Itoa(tg.Pid), addr}, intact: tg.Check}
		}},
	)
	cases = append(cases, procTargetVectors()...)
	for _, f := range []string{"environ", "cmdline", "maps", "status", "mem"} {
		cases = append(cases, vcase{name: "proc-read-" + f, vector: "proc-read", setup: func(e *env) fixture {
			tg := e.startSleep()
			args := []string{fmt.Sprintf("/proc/%d/%s", tg.Pid, f)}
			if f == "mem" {
				addr, err := tg.FirstMapping(controlPATH)
				if err != nil {
					e.t.Fatal(err)
				}
				args = append(args, addr)
			}
			return fixture{args: args, intact: tg.Check}
		}})
	}
	cases = append(cases, vcase{name: "proc-read-launcher-parent-environ", vector: "proc-read", setup: func(*env) fixture {
		// The CLI's parent is this test process.
		return fixture{args: []string{fmt.Sprintf("/proc/%d/environ", os.Getpid())}}
	}})

	// Files (guarantees 2 and 3, R6, R10).
	cases = append(cases,
		vcase{name: "read-file-shadow", vector: "read-file", setup: func(*env) fixture {
			return fixture{args: []string{"/etc/shadow"}}
		}},
		vcase{name: "read-file-outside", vector: "read-file", setup: func(e *env) fixture {
			return fixture{args: []string{e.outsideFile("secret.txt")}}
		}},
	)
	// Credential files inside a directory granted with --ro (policy issue
	// 4, credential re-deny, which has landed: a row that escapes fails).
	for _, cf := range credentialFiles {
		cases = append(cases, vcase{name: "read-credential-in-ro-root/" + cf, vector: "read-file",
			setup: func(e *env) fixture {
				ro := e.freshDir("ro-")
				p := e.file(ro, cf, 0o600)
				return fixture{args: []string{p}, cliArgs: []string{"--ro", ro}}
			}})
	}
	cases = append(cases,
		vcase{name: "read-credential-ro-cargo-home", vector: "read-file", setup: func(e *env) fixture {
			// --ro ~/.cargo itself (a cargo home).
			home := e.freshDir("home-")
			p := e.file(home, ".cargo/credentials.toml", 0o600)
			e.file(home, ".cargo/config.toml", 0o644)
			return fixture{args: []string{p}, cliArgs: []string{"--ro", filepath.Join(home, ".cargo")}}
		}},
		// Dotfile managers (stow, chezmoi, yadm) make ~/.aws or ~/.npmrc
		// symlinks into a dotfiles directory; the tool reads the usual path.
		vcase{name: "read-credential-symlinked-dir-in-ro-root", vector: "read-file", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			e.file(ro, "dotfiles/aws/credentials", 0o600)
			e.symlink("dotfiles/aws", filepath.Join(ro, ".aws"))
			return fixture{args: []string{filepath.Join(ro, ".aws", "credentials")}, cliArgs: []string{"--ro", ro}}
		}},
		vcase{name: "read-credential-symlinked-file-in-ro-root", vector: "read-file", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			e.file(ro, "dotfiles/npmrc", 0o600)
			e.symlink("dotfiles/npmrc", filepath.Join(ro, ".npmrc"))
			return fixture{args: []string{filepath.Join(ro, ".npmrc")}, cliArgs: []string{"--ro", ro}}
		}},
		vcase{name: "read-credential-symlink-in-ro-root-to-denied", vector: "read-file", setup: func(e *env) fixture {
			// The reverse: an innocent name pointing at the re-denied file.
			ro := e.freshDir("ro-")
			e.file(ro, ".git-credentials", 0o600)
			e.symlink(".git-credentials", filepath.Join(ro, "notes.txt"))
			return fixture{args: []string{filepath.Join(ro, "notes.txt")}, cliArgs: []string{"--ro", ro}}
		}},
	)
	// A symlink inside a --ro root that points outside it must not widen
	// the grant: neither when the root is granted whole, nor when the
	// credential re-deny grants its entries one by one (a rule made by
	// opening a symlink lands on its target).
	for _, split := range []bool{false, true} {
		name := "read-outside-via-ro-root-symlink"
		if split {
			name += "-with-credential-sibling"
		}
		cases = append(cases, vcase{name: name, vector: "read-file", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			secret := e.outsideFile("secret.txt")
			if split {
				e.file(ro, ".npmrc", 0o600)
			}
			e.symlink(e.outside(), filepath.Join(ro, "link"))
			// Read the outside file by its own path, not through the link.
			return fixture{args: []string{secret}, cliArgs: []string{"--ro", ro}}
		}})
	}
	cases = append(cases, vcase{name: "read-shadow-via-ro-root-symlink-to-etc-with-credential-sibling", vector: "read-file", setup: func(e *env) fixture {
		ro := e.freshDir("ro-")
		e.file(ro, ".npmrc", 0o600)
		e.symlink("/etc", filepath.Join(ro, "etc"))
		return fixture{args: []string{"/etc/shadow"}, cliArgs: []string{"--ro", ro}}
	}})

	// Credential files in the work directory itself (a granted directory
	// too; notes.md guarantee 2 names "inside a granted directory").
	for _, cf := range []string{".npmrc", ".git-credentials"} {
		cases = append(cases, vcase{name: "read-credential-in-workdir/" + cf, vector: "read-file",
			setup: func(e *env) fixture {
				// The run is refused: Landlock cannot hide part of a
				// directory the command may write.
				return fixture{args: []string{e.file(e.wd, cf, 0o600)}, mayRefuse: true}
			}})
	}
	cases = append(cases,
		vcase{name: "write-file-outside", vector: "write-file", setup: func(e *env) fixture {
			p := e.outsideFile("victim")
			return fixture{args: []string{p}, effect: contentChanged(p)}
		}},
		vcase{name: "write-file-new-outside", vector: "write-file", setup: func(e *env) fixture {
			p := filepath.Join(e.outside(), "planted")
			return fixture{args: []string{p}, effect: fx.Exists(p)}
		}},
		vcase{name: "write-file-ro-root", vector: "write-file", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			p := e.file(ro, "victim", 0o644)
			return fixture{args: []string{p}, cliArgs: []string{"--ro", ro}, effect: contentChanged(p)}
		}},
		vcase{name: "append-file-outside", vector: "append-file", setup: func(e *env) fixture {
			p := e.outsideFile("victim")
			return fixture{args: []string{p}, effect: contentChanged(p)}
		}},
		vcase{name: "truncate-file-outside", vector: "truncate-file", setup: func(e *env) fixture {
			p := e.outsideFile("victim")
			return fixture{args: []string{p}, effect: contentChanged(p)}
		}},
		vcase{name: "truncate-file-ro-root", vector: "truncate-file", setup: func(e *env) fixture {
			ro := e.freshDir("ro-")
			p := e.file(ro, "victim", 0o644)
			return fixture{args: []string{p}, cliArgs: []string{"--ro", ro}, effect: contentChanged(p)}
		}},
	)

	// Metadata (seccomp notification supervisor): on a file in an outside
	// directory (not granted at all) and in a directory granted with --ro.
	where := []struct {
		name string
		file func(e *env) (string, []string)
	}{
		{"outside", func(e *env) (string, []string) { return e.outsideFile("victim"), nil }},
		{"ro-root", func(e *env) (string, []string) {
			ro := e.freshDir("ro-")
			return e.file(ro, "victim", 0o644), []string{"--ro", ro}
		}},
	}
	for _, w := range where {
		cases = append(cases,
			vcase{name: "chmod-" + w.name, vector: "chmod", setup: func(e *env) fixture {
				p, ro := w.file(e)
				return fixture{args: []string{p, "4777"}, cliArgs: ro, effect: func() (bool, string) {
					st, err := statOf(p)
					if err != nil {
						return true, err.Error()
					}
					return st.Mode&0o7777 != 0o644, fmt.Sprintf("%s has mode %#o", p, st.Mode&0o7777)
				}}
			}},
			vcase{name: "chown-" + w.name, vector: "chown", setup: func(e *env) fixture {
				p, ro := w.file(e)
				// Owned by the user with a foreign group; the attack gives
				// it the user's own group, which needs no capability.
				other := 0
				if e.user.UID == 0 {
					other = 1
				}
				if os.Geteuid() == 0 {
					e.own(p, other)
				} else {
					// Unprivileged, the harness can only hand the victim
					// to another group of its own.
					other = e.secondGroup()
					if err := os.Lchown(p, -1, other); err != nil {
						e.t.Fatal(err)
					}
				}
				return fixture{args: []string{p, strconv.Itoa(e.user.UID), strconv.Itoa(e.user.UID)}, cliArgs: ro,
					effect: func() (bool, string) {
						st, err := statOf(p)
						if err != nil {
							return true, err.Error()
						}
						return int(st.Gid) != other, fmt.Sprintf("%s is owned by %d:%d", p, st.Uid, st.Gid)
					}}
			}},
			vcase{name: "utimes-" + w.name, vector: "utimes", setup: func(e *env) fixture {
				p, ro := w.file(e)
				return fixture{args: []string{p}, cliArgs: ro, effect: func() (bool, string) {
					st, err := statOf(p)
					if err != nil {
						return true, err.Error()
					}
					return st.Mtim.Sec == 1000000000, fmt.Sprintf("%s has mtime %d", p, st.Mtim.Sec)
				}}
			}},
			vcase{name: "setxattr-" + w.name, vector: "setxattr", setup: func(e *env) fixture {
				p, ro := w.file(e)
				if err := unix.Setxattr(p, "user.probe-check", []byte("1"), 0); err != nil {
					e.t.Skipf("not applicable on this host as %s: user xattrs unsupported here: %v", e.user.Name, err)
				}
				_ = unix.Removexattr(p, "user.probe-check")
				return fixture{args: []string{p}, cliArgs: ro, effect: func() (bool, string) {
					buf := make([]byte, 16)
					n, err := unix.Getxattr(p, "user.confine", buf)
					if err != nil {
						return false, fmt.Sprintf("%s has no user.confine (%v)", p, err)
					}
					return true, fmt.Sprintf("%s has user.confine=%q", p, buf[:n])
				}}
			}},
			vcase{name: "removexattr-" + w.name, vector: "removexattr", setup: func(e *env) fixture {
				p, ro := w.file(e)
				if err := unix.Setxattr(p, "user.keep", []byte("1"), 0); err != nil {
					e.t.Skipf("not applicable on this host as %s: user xattrs unsupported here: %v", e.user.Name, err)
				}
				return fixture{args: []string{p, "user.keep"}, cliArgs: ro, effect: func() (bool, string) {
					if _, err := unix.Getxattr(p, "user.keep", nil); err != nil {
						return true, fmt.Sprintf("user.keep is gone from %s (%v)", p, err)
					}
					return false, fmt.Sprintf("%s still has user.keep", p)
				}}
			}},
			vcase{name: "fchmod-ro-" + w.name, vector: "fchmod-ro", setup: func(e *env) fixture {
				p, ro := w.file(e)
				return fixture{args: []string{p}, cliArgs: ro, effect: func() (bool, string) {
					st, err := statOf(p)
					if err != nil {
						return true, err.Error()
					}
					return st.Mode&0o777 == 0o777, fmt.Sprintf("%s has mode %#o", p, st.Mode&0o7777)
				}}
			}},
		)
	}

	cases = append(cases,
		vcase{name: "rename-out", vector: "rename-out", setup: func(e *env) fixture {
			src := e.file(e.wd, "loot", 0o644)
			dst := filepath.Join(e.outside(), "loot")
			return fixture{args: []string{src, dst}, effect: fx.Exists(dst)}
		}},
		vcase{name: "rename-in", vector: "rename-out", setup: func(e *env) fixture {
			src := e.outsideFile("victim")
			return fixture{args: []string{src, filepath.Join(e.wd, "stolen")}, effect: fx.Gone(src)}
		}},
		vcase{name: "link-out", vector: "link-out", setup: func(e *env) fixture {
			src := e.file(e.wd, "loot", 0o644)
			dst := filepath.Join(e.outside(), "loot")
			return fixture{args: []string{src, dst}, effect: fx.Exists(dst)}
		}},
		vcase{name: "link-in-then-write", vector: "link-out", setup: func(e *env) fixture {
			// Hard-link an outside file into the work directory, then write
			// it through the (writable) work directory path.
			victim := e.outsideFile("victim")
			in := filepath.Join(e.wd, "inside-alias")
			script := `"$0" link-out "$1" "$2" && "$0" append-file "$2"`
			return fixture{command: []string{"sh", "-c", script, probePath, victim, in}, effect: contentChanged(victim)}
		}},
		vcase{name: "symlink-write", vector: "symlink-write", setup: func(e *env) fixture {
			// R10: a symlink in the work directory pointing outside.
			victim := e.outsideFile("victim")
			return fixture{args: []string{filepath.Join(e.wd, "innocent"), victim}, effect: contentChanged(victim)}
		}},
		vcase{name: "symlink-write-new", vector: "symlink-write", setup: func(e *env) fixture {
			victim := filepath.Join(e.outside(), "planted")
			return fixture{args: []string{filepath.Join(e.wd, "innocent"), victim}, effect: fx.Exists(victim)}
		}},
		vcase{name: "mknod-in-workdir", vector: "mknod", setup: func(e *env) fixture {
			p := filepath.Join(e.wd, "null")
			return fixture{args: []string{p}, effect: fx.Exists(p)}
		}},
		vcase{name: "mknod-outside", vector: "mknod", setup: func(e *env) fixture {
			p := filepath.Join(e.outside(), "null")
			return fixture{args: []string{p}, effect: fx.Exists(p)}
		}},
		vcase{name: "mknod-fifo-outside", vector: "mknod-fifo", setup: func(e *env) fixture {
			p := filepath.Join(e.outside(), "fifo")
			return fixture{args: []string{p}, effect: fx.Exists(p)}
		}},
		vcase{name: "tmp-write", vector: "tmp-write", setup: func(e *env) fixture {
			p := filepath.Join("/tmp", fx.RandName("confine-escape-"))
			e.t.Cleanup(func() { _ = os.Remove(p) })
			return fixture{args: []string{p}, effect: fx.Exists(p)}
		}},
		vcase{name: "shm-write", vector: "shm-write", setup: func(e *env) fixture {
			name := fx.RandName("confine-escape-")
			p := filepath.Join("/dev/shm", name)
			e.t.Cleanup(func() { _ = os.Remove(p) })
			// Under landlock+namespaces the probe's write succeeds in the
			// run's private /dev/shm (a tmpfs of its own, gone with it):
			// only the host's /dev/shm counts.
			return fixture{args: []string{name}, effect: fx.Exists(p), probeMayEscape: true}
		}},
		vcase{name: "open-by-handle", vector: "open-by-handle", setup: func(e *env) fixture {
			return fixture{args: []string{e.outsideFile("secret.txt")}}
		}},
		vcase{name: "block-device", vector: "block-device", setup: func(e *env) fixture {
			for _, d := range []string{"/dev/vda", "/dev/sda", "/dev/nvme0n1", "/dev/loop0"} {
				if st, err := os.Stat(d); err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0 {
					return fixture{args: []string{d}}
				}
			}
			e.t.Skipf("not applicable on this host as %s: no block device among /dev/vda /dev/sda /dev/nvme0n1 /dev/loop0", e.user.Name)
			return fixture{}
		}},
	)
	cases = withFileVectors(cases)

	// Terminals: the launched process (probe or CLI) is a session leader
	// whose controlling terminal and stdin is a pty the test opened: the
	// caller's terminal.
	ttyCase := func(name, vector string, arg func(p *fx.PTY) string) vcase {
		return vcase{name: name, vector: vector, setup: func(e *env) fixture {
			p := e.openPTY()
			return fixture{args: []string{arg(p)}, stdin: p.Slave, ctty: true, effect: p.Injected(e.settle())}
		}}
	}
	slavePath := func(p *fx.PTY) string { return p.Path }
	stdinPath := func(*fx.PTY) string { return "/proc/self/fd/0" }
	devTTY := func(*fx.PTY) string { return "/dev/tty" }
	cases = append(cases,
		ttyCase("tiocsti-pts-path", "tiocsti", slavePath),
		ttyCase("tiocsti-hi-pts-path", "tiocsti-hi", slavePath),
		ttyCase("tioclinux-pts-path", "tioclinux", slavePath),
		ttyCase("tiocsti-stdin", "tiocsti", stdinPath),
		ttyCase("tiocsti-hi-stdin", "tiocsti-hi", stdinPath),
		ttyCase("tiocsti-dev-tty", "tiocsti", devTTY),
		ttyCase("tiocsti-hi-dev-tty", "tiocsti-hi", devTTY),
	)

	// Kernel attack surface.
	for _, v := range []string{"userns", "clone-newuser", "clone3-newuser", "keyctl", "bpf", "perf", "userfaultfd"} {
		cases = append(cases, vcase{name: v, vector: v, setup: func(*env) fixture { return fixture{} }})
	}
	cases = append(cases, vcase{name: "mount", vector: "mount", setup: func(e *env) fixture {
		d := filepath.Join(e.wd, "mnt")
		if err := os.Mkdir(d, 0o755); err != nil {
			e.t.Fatal(err)
		}
		e.own(d, e.user.UID)
		return fixture{args: []string{d}}
	}})

	// Resources and leftovers (guarantee 5).
	cases = append(cases,
		vcase{name: "setsid-daemon", vector: "setsid-daemon", setup: func(e *env) fixture {
			marker := filepath.Join(e.wd, "daemon.pid")
			// The daemon's pid as the harness sees it: the one it wrote
			// is its PID namespace's under namespaces, so the confined
			// run is told apart by a token in its environment.
			tok := testutil.NewToken()
			daemons := func() []int {
				if e.confined {
					return testutil.TokenPids(tok)
				}
				if ps, _ := testutil.ReadPids(marker); len(ps) > 0 && testutil.Alive(ps[0]) {
					return ps[:1]
				}
				return nil
			}
			var seen []int
			alive := func() (bool, string) {
				ps, err := testutil.ReadPids(marker)
				if err != nil || len(ps) == 0 {
					return false, fmt.Sprintf("no daemon pid in %s (%v)", marker, err)
				}
				// A liveness bound: the confined tree must be gone once the
				// CLI has returned, which should be at once.
				if e.confined {
					testutil.Await(func() bool { return len(daemons()) == 0 })
				}
				if seen = daemons(); len(seen) > 0 {
					return true, fmt.Sprintf("daemon (pid %v here, %d in the run) is alive after the run returned", seen, ps[0])
				}
				return false, fmt.Sprintf("daemon (pid %d in the run) is gone", ps[0])
			}
			e.t.Cleanup(func() {
				for _, pid := range daemons() {
					if ownedBy(pid, e.user.UID) {
						_ = unix.Kill(pid, unix.SIGKILL) // the run's daemon
					}
				}
			})
			return fixture{args: []string{marker}, cliArgs: []string{"--env", testutil.TokenEnv + "=" + tok}, effect: alive, probeMayEscape: true}
		}},
		// Guarantee 6: no capability left in any set, no_new_privs. The
		// confined probe must say so itself (a probe that cannot look
		// proves nothing).
		vcase{name: "privilege", vector: "privilege", setup: func(e *env) fixture {
			return fixture{mustReport: true}
		}},
		vcase{name: "fork-bomb", vector: "fork-bomb", setup: func(e *env) fixture {
			if e.confined {
				return fixture{args: []string{"100000"}, cliArgs: []string{"--max-procs", "64"}, mustReport: true}
			}
			return fixture{args: []string{"20"}}
		}},
		// One process over --memory, under whatever bound the run gets
		// here (its memory cgroup: the kernel kills the attempt; without
		// one RLIMIT_DATA refuses the allocation). The probe must report
		// either way: PROT_NONE reservations (the Go runtime's) do not
		// count against either bound.
		vcase{name: "memory-bomb-1GiB", vector: "memory-bomb", setup: func(e *env) fixture {
			if e.confined {
				return fixture{args: []string{"2048"}, cliArgs: []string{"--memory", "1GiB"}, mustReport: true}
			}
			return fixture{args: []string{"64"}}
		}},
		vcase{name: "memory-bomb-512MiB", vector: "memory-bomb", setup: func(e *env) fixture {
			if e.confined {
				return fixture{args: []string{"2048"}, cliArgs: []string{"--memory", "512MiB"}, mustReport: true}
			}
			return fixture{args: []string{"64"}}
		}},
	)

	// Environment (guarantee 2, R11).
	secrets := []string{
		canary,
		"AWS_SECRET_ACCESS_KEY=aws-canary-9b1e",
		"SSH_AUTH_SOCK=/tmp/ssh-canary/agent.1",
		"LD_PRELOAD=/nonexistent.so",
	}
	cases = append(cases,
		vcase{name: "env-dump-canaries", vector: "env-dump", setup: func(e *env) fixture {
			var canaries []string
			for _, kv := range secrets {
				k, v, _ := strings.Cut(kv, "=")
				canaries = append(canaries, k, v)
			}
			return fixture{args: canaries, env: secrets}
		}},
		vcase{name: "r11-caller-ldpreload-and-path", vector: "env-dump", setup: func(e *env) fixture {
			return fixture{env: []string{"LD_PRELOAD=/nonexistent.so", "PATH=" + e.wd + ":/usr/local/bin:/usr/bin:/bin"}, judge: envJudge(e.wd)}
		}},
		vcase{name: "r11-env-flag-ldpreload", vector: "env-dump", setup: func(e *env) fixture {
			v := "LD_PRELOAD=/nonexistent.so"
			return fixture{env: []string{v}, cliArgs: []string{"--env", v}, judge: envJudge(e.wd), mayRefuse: true}
		}},
		vcase{name: "r11-env-flag-path-workdir", vector: "env-dump", setup: func(e *env) fixture {
			v := "PATH=" + e.wd + ":/usr/bin:/bin"
			return fixture{env: []string{v}, cliArgs: []string{"--env", v}, judge: envJudge(e.wd), mayRefuse: true}
		}},
		vcase{name: "r11-env-flag-path-empty-component", vector: "env-dump", setup: func(e *env) fixture {
			v := "PATH=:/usr/bin:/bin"
			return fixture{env: []string{v}, cliArgs: []string{"--env", v}, judge: envJudge(e.wd), mayRefuse: true}
		}},
		vcase{name: "r11-env-flag-ld-library-path", vector: "env-dump", setup: func(e *env) fixture {
			v := "LD_LIBRARY_PATH=" + e.wd
			return fixture{env: []string{v}, cliArgs: []string{"--env", v}, judge: envJudge(e.wd), mayRefuse: true}
		}},
	)
	cases = append(cases, nprocVectors()...)
	cases = append(cases, memoryVectors()...)
	return cases
}

// ownedBy reports whether pid runs as uid (so the test only kills what the
// run it started left behind).
func ownedBy(pid, uid int) bool {
	var st unix.Stat_t
	if err := unix.Stat(fmt.Sprintf("/proc/%d", pid), &st); err != nil {
		return false
	}
	return int(st.Uid) == uid
}
