//go:build linux

package selftest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/spec"
)

// Case is one row of the selftest: an attack on one guarantee.
type Case struct {
	// Guarantee is the name (ledger.Names) the attack targets.
	Guarantee string
	// Name names the row; Vector is the probe vector it runs.
	Name, Vector string
	// Setup prepares one phase and returns the fixture. An errNA error
	// makes the row not applicable on this host; any other error is a
	// setup failure.
	Setup func(e *Env) (Fixture, error)
}

// Fixture is what a case's setup returns for one phase.
type Fixture struct {
	// Args are the probe's arguments after the vector name.
	Args []string
	// RunFlags are extra `confine run` flags (confined phase only).
	RunFlags []string
	// Env is added to the environment of the probe (control) and of
	// `confine run` (confined): what the command must not inherit.
	Env []string
	// Extra become descriptors 3, 4, ... of the launched process.
	Extra []*os.File
	// TTY, when set, is the launched process's stdin and controlling
	// terminal (in a new session): the caller's terminal.
	TTY *fixture.PTY
	// Effect reports whether the attack's side effect happened. A control
	// that reports escaped must show it; a confined run must not.
	Effect func() (bool, string)
	// Intact, checked after the confined run, is what must still hold
	// (the victim alive and untraced).
	Intact func() error
	// ProbeMayEscape: in the confined run the probe's own success is not
	// the verdict, only Effect is (the daemon may live while the run does;
	// it must not outlive it).
	ProbeMayEscape bool
	// MustReport: a confined run without a "blocked" report from the
	// probe (confine refused, the probe could not start) proves nothing
	// and is an error rather than "blocked".
	MustReport bool
}

// canaryName is planted in the environments the command must not see.
const canaryName = "CONFINE_SELFTEST_CANARY"

// credentialFiles are credential files that a --ro grant must not expose.
var credentialFiles = []string{".npmrc", ".git-credentials", ".aws/credentials", ".ssh/id_ed25519"}

// listenCase is a network vector that must not reach a loopback listener
// of the selftest.
func listenCase(name, vector, network, addr string) Case {
	return Case{Guarantee: spec.GNoNetwork, Name: name, Vector: vector, Setup: func(e *Env) (Fixture, error) {
		port, r, err := e.tcp(network, addr)
		if err != nil {
			return Fixture{}, errNA{fmt.Sprintf("cannot listen on %s: %v", addr, err)}
		}
		return Fixture{Args: []string{port}, Effect: e.await(r)}, nil
	}}
}

// plain is a vector that needs no fixture: the probe's report is the
// verdict (a kernel object created, a namespace entered).
func plain(g, vector string) Case {
	return Case{Guarantee: g, Name: vector, Vector: vector, Setup: func(*Env) (Fixture, error) { return Fixture{}, nil }}
}

// outsideFileCase attacks a fresh file outside every root.
func outsideFileCase(g, name, vector string, args func(p string) []string, effect func(p string) func() (bool, string)) Case {
	return Case{Guarantee: g, Name: name, Vector: vector, Setup: func(e *Env) (Fixture, error) {
		p, err := e.outsideFile("victim")
		if err != nil {
			return Fixture{}, err
		}
		f := Fixture{Args: args(p)}
		if effect != nil {
			f.Effect = effect(p)
		}
		return f, nil
	}}
}

func only(p string) []string { return []string{p} }

// modeChanged is the effect "the file's mode is no longer 0644".
func modeChanged(p string) func() (bool, string) {
	return func() (bool, string) {
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return true, err.Error()
		}
		return st.Mode&0o7777 != 0o644, fmt.Sprintf("%s has mode %#o", p, st.Mode&0o7777)
	}
}

// utimesStamp is the mtime the probe's utimes vector sets.
const utimesStamp = 1000000000

// Cases is the selftest's table: at least one attack per guarantee of the
// ledger, each named and set up as the escape suite's row of that name
// (the ledger lists those rows per guarantee).
func Cases() []Case {
	cs := []Case{
		// no-network
		listenCase("tcp-connect", "tcp-connect", "tcp4", "127.0.0.1:0"),
		listenCase("tcp6-connect", "tcp6-connect", "tcp6", "[::1]:0"),
		listenCase("mptcp-connect", "mptcp-connect", "tcp4", "127.0.0.1:0"),
		listenCase("iouring-socket", "iouring-socket", "tcp4", "127.0.0.1:0"),
		listenCase("socketcall32", "socketcall32", "tcp4", "127.0.0.1:0"),
		listenCase("x32-syscall", "x32-syscall", "tcp4", "127.0.0.1:0"),
		{Guarantee: spec.GNoNetwork, Name: "udp-send", Vector: "udp-send", Setup: func(e *Env) (Fixture, error) {
			pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
			if err != nil {
				return Fixture{}, errNA{fmt.Sprintf("cannot listen on udp 127.0.0.1: %v", err)}
			}
			r := fixture.PacketListener(pc, e.onCleanup)
			return Fixture{Args: []string{strconv.Itoa(pc.LocalAddr().(*net.UDPAddr).Port)}, Effect: e.await(r)}, nil
		}},
		plain(spec.GNoNetwork, "netlink"),

		// no-inherited-env
		{Guarantee: spec.GCleanEnv, Name: "env-dump-canaries", Vector: "env-dump", Setup: func(*Env) (Fixture, error) {
			v1, v2 := fixture.RandName("canary-"), fixture.RandName("aws-canary-")
			return Fixture{Args: []string{v1, v2}, Env: []string{canaryName + "=" + v1, "AWS_SECRET_ACCESS_KEY=" + v2}}, nil
		}},
	}

	// no-credential-files: confine's own capability key, in a home
	// granted read-only (docs/control-plane.md).
	cs = append(cs, Case{Guarantee: spec.GCredentials, Name: "ctl-read-cap-key-ro-home", Vector: "read-file",
		Setup: func(e *Env) (Fixture, error) {
			home, err := e.freshDir("home-")
			if err != nil {
				return Fixture{}, err
			}
			p, err := file(home, ".config/confine/cap.key", 0o600)
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{p}, RunFlags: []string{"--ro", home}, Env: []string{"HOME=" + home, "XDG_CONFIG_HOME="}}, nil
		}})
	// no-credential-files: inside a directory granted read-only.
	for _, cf := range credentialFiles {
		cs = append(cs, Case{Guarantee: spec.GCredentials, Name: "read-credential-in-ro-root/" + cf, Vector: "read-file",
			Setup: func(e *Env) (Fixture, error) {
				ro, err := e.freshDir("ro-")
				if err != nil {
					return Fixture{}, err
				}
				p, err := file(ro, cf, 0o600)
				if err != nil {
					return Fixture{}, err
				}
				return Fixture{Args: []string{p}, RunFlags: []string{"--ro", ro}}, nil
			}})
	}

	// no-inherited-fds: the launching process holds a pipe's write end.
	for _, fd := range []int{3, 9} {
		cs = append(cs, Case{Guarantee: spec.GNoInheritedFDs, Name: fmt.Sprintf("inherited-fd-%d", fd), Vector: "inherited-fd",
			Setup: func(e *Env) (Fixture, error) {
				r, w, err := os.Pipe()
				if err != nil {
					return Fixture{}, fmt.Errorf("pipe: %w", err)
				}
				e.onCleanup(func() { r.Close(); w.Close() })
				extra := make([]*os.File, fd-2)
				extra[fd-3] = w
				got := make(chan string, 1)
				go func() {
					buf := make([]byte, 64)
					n, _ := r.Read(buf) // returns at EOF: every write end closed
					got <- string(buf[:max(n, 0)])
				}()
				var seen *string
				return Fixture{Args: []string{strconv.Itoa(fd)}, Extra: extra, Effect: func() (bool, string) {
					if seen == nil {
						w.Close() // ours: EOF once the run's copies are gone
						s := ""
						fixture.WaitFor(10*time.Second, func() bool {
							select {
							case s = <-got:
								return true
							default:
								return false
							}
						})
						seen = &s
					}
					if *seen != "" {
						return true, fmt.Sprintf("the pipe behind fd %d received %q", fd, *seen)
					}
					return false, fmt.Sprintf("the pipe behind fd %d received nothing", fd)
				}}, nil
			}})
	}

	cs = append(cs,
		// fs-write-confined
		outsideFileCase(spec.GFSWrite, "write-file-outside", "write-file", only, contentChanged),
		outsideFileCase(spec.GFSWrite, "append-file-outside", "append-file", only, contentChanged),
		outsideFileCase(spec.GFSWrite, "truncate-file-outside", "truncate-file", only, contentChanged),
		Case{Guarantee: spec.GFSWrite, Name: "write-file-new-outside", Vector: "write-file", Setup: func(e *Env) (Fixture, error) {
			d, err := e.outside()
			if err != nil {
				return Fixture{}, err
			}
			p := filepath.Join(d, "planted")
			return Fixture{Args: []string{p}, Effect: fixture.Exists(p)}, nil
		}},
		Case{Guarantee: spec.GFSWrite, Name: "write-file-ro-root", Vector: "write-file", Setup: func(e *Env) (Fixture, error) {
			ro, err := e.freshDir("ro-")
			if err != nil {
				return Fixture{}, err
			}
			p, err := file(ro, "victim", 0o644)
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{p}, RunFlags: []string{"--ro", ro}, Effect: contentChanged(p)}, nil
		}},
		Case{Guarantee: spec.GFSWrite, Name: "rename-out", Vector: "rename-out", Setup: func(e *Env) (Fixture, error) {
			src, err := file(e.Workdir, "loot", 0o644)
			if err != nil {
				return Fixture{}, err
			}
			d, err := e.outside()
			if err != nil {
				return Fixture{}, err
			}
			dst := filepath.Join(d, "loot")
			return Fixture{Args: []string{src, dst}, Effect: fixture.Exists(dst)}, nil
		}},
		Case{Guarantee: spec.GFSWrite, Name: "symlink-write", Vector: "symlink-write", Setup: func(e *Env) (Fixture, error) {
			p, err := e.outsideFile("victim")
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{filepath.Join(e.Workdir, "innocent"), p}, Effect: contentChanged(p)}, nil
		}},
		Case{Guarantee: spec.GFSWrite, Name: "tmp-write", Vector: "tmp-write", Setup: func(e *Env) (Fixture, error) {
			p := filepath.Join("/tmp", fixture.RandName("confine-selftest-"))
			e.onCleanup(func() { _ = os.Remove(p) })
			return Fixture{Args: []string{p}, Effect: fixture.Exists(p)}, nil
		}},

		// no-git-persistence: the work directory is a git work tree.
		Case{Guarantee: spec.GGitPersistence, Name: "git-hook-write", Vector: "write-file", Setup: func(e *Env) (Fixture, error) {
			git, err := gitDir(e)
			if err != nil {
				return Fixture{}, err
			}
			hook := filepath.Join(git, "hooks", "pre-commit")
			return Fixture{Args: []string{hook}, Effect: fixture.Exists(hook)}, nil
		}},
		Case{Guarantee: spec.GGitPersistence, Name: "git-config-write", Vector: "append-file", Setup: func(e *Env) (Fixture, error) {
			git, err := gitDir(e)
			if err != nil {
				return Fixture{}, err
			}
			cfg := filepath.Join(git, "config")
			return Fixture{Args: []string{cfg}, Effect: contentChanged(cfg)}, nil
		}},
		Case{Guarantee: spec.GGitPersistence, Name: "git-hook-rename-in", Vector: "rename-out", Setup: func(e *Env) (Fixture, error) {
			git, err := gitDir(e)
			if err != nil {
				return Fixture{}, err
			}
			src, err := file(e.Workdir, "src/payload", 0o755)
			if err != nil {
				return Fixture{}, err
			}
			hook := filepath.Join(git, "hooks", "pre-commit")
			return Fixture{Args: []string{src, hook}, Effect: fixture.Exists(hook)}, nil
		}},

		// fs-read-confined
		outsideFileCase(spec.GFSRead, "read-file-outside", "read-file", only, nil),
		outsideFileCase(spec.GFSRead, "iouring-openat-outside", "iouring-openat", only, nil),
		outsideFileCase(spec.GFSRead, "open-by-handle", "open-by-handle", only, nil),
		Case{Guarantee: spec.GFSRead, Name: "read-file-shadow", Vector: "read-file", Setup: func(*Env) (Fixture, error) {
			return Fixture{Args: []string{"/etc/shadow"}}, nil
		}},

		// fs-metadata-confined
		outsideFileCase(spec.GFSMetadata, "chmod-outside", "chmod", func(p string) []string { return []string{p, "4777"} }, modeChanged),
		outsideFileCase(spec.GFSMetadata, "utimes-outside", "utimes", only, func(p string) func() (bool, string) {
			return func() (bool, string) {
				var st unix.Stat_t
				if err := unix.Lstat(p, &st); err != nil {
					return true, err.Error()
				}
				return st.Mtim.Sec == utimesStamp, fmt.Sprintf("%s has mtime %d", p, st.Mtim.Sec)
			}
		}),
		Case{Guarantee: spec.GFSMetadata, Name: "setxattr-outside", Vector: "setxattr", Setup: func(e *Env) (Fixture, error) {
			p, err := e.outsideFile("victim")
			if err != nil {
				return Fixture{}, err
			}
			if err := unix.Setxattr(p, "user.selftest-check", []byte("1"), 0); err != nil {
				return Fixture{}, errNA{fmt.Sprintf("user xattrs unsupported on %s: %v", filepath.Dir(p), err)}
			}
			_ = unix.Removexattr(p, "user.selftest-check")
			return Fixture{Args: []string{p}, Effect: func() (bool, string) {
				buf := make([]byte, 16)
				n, err := unix.Getxattr(p, "user.confine", buf)
				if err != nil {
					return false, fmt.Sprintf("%s has no user.confine", p)
				}
				return true, fmt.Sprintf("%s has user.confine=%q", p, buf[:n])
			}}, nil
		}},

		// no-foreign-unix-sockets
		Case{Guarantee: spec.GUnixSockets, Name: "abstract-unix", Vector: "abstract-unix", Setup: func(e *Env) (Fixture, error) {
			name := fixture.RandName("confine-selftest-")
			r, err := e.unixListener("@" + name)
			if err != nil {
				return Fixture{}, errNA{err.Error()}
			}
			return Fixture{Args: []string{name}, Effect: e.await(r)}, nil
		}},
		Case{Guarantee: spec.GUnixSockets, Name: "unix-connect-outside", Vector: "unix-connect", Setup: func(e *Env) (Fixture, error) {
			d, err := e.outside()
			if err != nil {
				return Fixture{}, err
			}
			r, err := e.unixListener(filepath.Join(d, "docker.sock"))
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{filepath.Join(d, "docker.sock")}, Effect: e.await(r)}, nil
		}},
		Case{Guarantee: spec.GUnixSockets, Name: "unix-dgram-outside", Vector: "unix-dgram", Setup: func(e *Env) (Fixture, error) {
			d, err := e.outside()
			if err != nil {
				return Fixture{}, err
			}
			path := filepath.Join(d, "log.sock")
			pc, err := net.ListenPacket("unixgram", path)
			if err != nil {
				return Fixture{}, fmt.Errorf("listen on %s: %w", path, err)
			}
			r := fixture.PacketListener(pc, e.onCleanup)
			return Fixture{Args: []string{path}, Effect: e.await(r)}, nil
		}},

		// no-foreign-signals
		Case{Guarantee: spec.GSignals, Name: "kill", Vector: "kill", Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=victim")
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{strconv.Itoa(v.Pid)}, Effect: v.Ended(e.settle()), Intact: v.Check}, nil
		}},

		// no-process-inspection
		Case{Guarantee: spec.GProcInspect, Name: "proc-read-environ", Vector: "proc-read", Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=" + fixture.RandName("victim-"))
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{fmt.Sprintf("/proc/%d/environ", v.Pid)}, Intact: v.Check}, nil
		}},
		Case{Guarantee: spec.GProcInspect, Name: "ptrace", Vector: "ptrace", Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=victim")
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{strconv.Itoa(v.Pid)}, Intact: v.Check}, nil
		}},
		Case{Guarantee: spec.GProcInspect, Name: "process-vm-readv", Vector: "process-vm-readv", Setup: func(e *Env) (Fixture, error) {
			v, err := e.startVictim(canaryName + "=victim")
			if err != nil {
				return Fixture{}, err
			}
			addr, err := v.FirstMapping(victimPATH)
			if err != nil {
				return Fixture{}, err
			}
			return Fixture{Args: []string{strconv.Itoa(v.Pid), addr}, Intact: v.Check}, nil
		}},
	)

	// no-terminal-injection: a pty the selftest opened plays the caller's
	// terminal (stdin and controlling terminal of what it launches).
	for _, tc := range []struct{ name, vector, path string }{
		{"tiocsti-pts-path", "tiocsti", ""},
		{"tiocsti-stdin", "tiocsti", "/proc/self/fd/0"},
		{"tiocsti-dev-tty", "tiocsti", "/dev/tty"},
		{"tioclinux-pts-path", "tioclinux", ""},
	} {
		cs = append(cs, Case{Guarantee: spec.GTerminal, Name: tc.name, Vector: tc.vector, Setup: func(e *Env) (Fixture, error) {
			p, err := e.openPTY()
			if err != nil {
				return Fixture{}, err
			}
			path := tc.path
			if path == "" {
				path = p.Path
			}
			return Fixture{Args: []string{path}, TTY: p, Effect: p.Injected(e.settle())}, nil
		}})
	}

	// reduced-kernel-surface
	for _, v := range []string{"userns", "clone-newuser", "clone3-newuser", "bpf", "keyctl", "perf", "userfaultfd"} {
		cs = append(cs, plain(spec.GKernelSurface, v))
	}
	cs = append(cs,
		Case{Guarantee: spec.GKernelSurface, Name: "mount", Vector: "mount", Setup: func(e *Env) (Fixture, error) {
			d := filepath.Join(e.Workdir, "mnt")
			if err := os.Mkdir(d, 0o755); err != nil {
				return Fixture{}, fmt.Errorf("mount point: %w", err)
			}
			return Fixture{Args: []string{d}}, nil
		}},

		// bounded-resources: the probe asks for 2 GiB under --memory 1GiB
		// (killed at the run's memory cgroup's bound, or refused by
		// RLIMIT_DATA where there is none).
		Case{Guarantee: spec.GResources, Name: "memory-bomb-1GiB", Vector: "memory-bomb", Setup: func(e *Env) (Fixture, error) {
			if e.Confined {
				return Fixture{Args: []string{"2048"}, RunFlags: []string{"--memory", "1GiB"}, MustReport: true}, nil
			}
			return Fixture{Args: []string{"64"}}, nil
		}},
		// bounded-processes: a small bomb. The control starts 20 processes;
		// the confined run asks for 400 under --max-procs 64: more than the
		// 64+300 a PID namespace's pid_max may allow (nsinit.PidMax), and
		// a limit that does not hold costs 400 sleeping processes, never
		// the host.
		Case{Guarantee: spec.GProcesses, Name: "fork-bomb", Vector: "fork-bomb", Setup: func(e *Env) (Fixture, error) {
			if e.Confined {
				return Fixture{Args: []string{"400"}, RunFlags: []string{"--max-procs", "64"}, MustReport: true}, nil
			}
			return Fixture{Args: []string{"20"}}, nil
		}},

		// tree-kill: a setsid()ed, double-forked daemon must not outlive
		// the run. It is found by its marker path on its command line (its
		// pid inside a PID namespace is not the host's).
		Case{Guarantee: spec.GTreeKill, Name: "setsid-daemon", Vector: "setsid-daemon", Setup: func(e *Env) (Fixture, error) {
			marker := filepath.Join(e.Workdir, "daemon.pid")
			e.onCleanup(func() { killProcessesWith(marker) })
			return Fixture{Args: []string{marker}, ProbeMayEscape: true, Effect: func() (bool, string) {
				if e.Confined { // the run's tree must be gone once confine returned
					fixture.WaitFor(controlSettle, func() bool { return len(processesWith(marker)) == 0 })
				}
				if ps := processesWith(marker); len(ps) > 0 {
					return true, fmt.Sprintf("daemon (pid %v) is alive after the run returned", ps)
				}
				return false, "no daemon left"
			}}, nil
		}},

		// no-privilege
		plain(spec.GNoPrivilege, "privilege"),
	)
	return append(cs, processTargetCases()...)
}
