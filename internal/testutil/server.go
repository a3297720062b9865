//go:build linux

package testutil

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// ViaServerEnv, set to "1" in a test binary's environment, sends every
// `confine run` that CLI starts through a `confine serve` of the run's uid
// (started by the test process on first use, one per uid and server-side
// setting, and stopped by RemoveSharedDir): the escape suite and the CLI
// tests then prove the warm launcher's path.
const ViaServerEnv = "CONFINE_TEST_VIA_SERVER"

// ViaServer reports whether this test run goes through `confine serve`.
func ViaServer() bool { return os.Getenv(ViaServerEnv) == "1" }

// serverSideEnv are variables a test may set for the CLI that the library
// reads from its own process, not the caller's: through a server they
// must be the server's, so a server is started with them.
var serverSideEnv = []string{"CONFINE_NO_MEMORY_CGROUP", ReadOnlyCgroupEnv, "CONFINE_SIM_LANDLOCK_ABI"}

var (
	serversMu sync.Mutex
	servers   = map[string]*Server{}
)

// Server is a `confine serve` the tests started.
type Server struct {
	Socket string
	cmd    *exec.Cmd
}

// Stop ends the server (SIGTERM: it ends its runs and removes its socket)
// and waits for it.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// StartServer starts `bin serve` as uid with env added to the CLI's usual
// environment, its socket in a fresh 0700 directory of uid's inside
// SharedDir, and returns once it listens (it says so on stderr).
func StartServer(bin string, uid int, container bool, env []string) (*Server, error) {
	if shareDir == "" {
		return nil, fmt.Errorf("start server: no shared dir (call SharedDir first)")
	}
	dir, err := os.MkdirTemp(shareDir, "srv-")
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 && uid != 0 {
		if err := os.Chown(dir, uid, uid); err != nil {
			return nil, err
		}
	}
	return StartServerAt(bin, uid, container, env, filepath.Join(dir, "serve.sock"))
}

// StartServerAt starts `bin serve` as uid with env added to the CLI's
// usual environment, at socket (its directory must exist, 0700, uid's),
// or, with socket "", at the default socket env leads to, and returns
// once it listens; Server.Socket is where it says it listens.
func StartServerAt(bin string, uid int, container bool, env []string, socket string) (*Server, error) {
	args := []string{"serve"}
	if socket != "" {
		args = append(args, "--socket", socket)
	}
	c := CLI{Bin: bin, UID: uid, Dir: "/", Env: env, Args: args, Container: container}
	cmd := c.Command()
	errR, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(errR)
	var said []string
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "confine: serving uid"); ok {
			if _, at, ok := strings.Cut(rest, " at "); ok {
				socket = at
			}
			// Keep draining, so that its log never blocks it.
			go func() {
				for sc.Scan() {
					fmt.Fprintln(os.Stderr, "confine serve:", sc.Text())
				}
			}()
			fmt.Fprintf(os.Stderr, "testutil: started confine serve as uid %d at %s (%s)\n", uid, socket, Mode())
			return &Server{Socket: socket, cmd: cmd}, nil
		}
		said = append(said, line)
	}
	_ = cmd.Wait()
	return nil, fmt.Errorf("confine serve as uid %d did not start: %s", uid, strings.Join(said, "; "))
}

// serverFor is the shared server for c's uid and server-side settings.
func serverFor(c CLI) (*Server, error) {
	var serverEnv []string
	for _, kv := range c.Env {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(serverSideEnv, name) {
			serverEnv = append(serverEnv, kv)
		}
	}
	slices.Sort(serverEnv)
	container := c.Container || SimulatingContainer()
	key := fmt.Sprintf("%s|%d|%v|%s", c.Bin, c.UID, container, strings.Join(serverEnv, "\x00"))
	serversMu.Lock()
	defer serversMu.Unlock()
	if s := servers[key]; s != nil {
		return s, nil
	}
	s, err := StartServer(c.Bin, c.UID, container, serverEnv)
	if err != nil {
		return nil, err
	}
	servers[key] = s
	return s, nil
}

// viaServerArgs rewrites `run ARGS` to `run --server=SOCKET ARGS` when
// the tests go through a server; other commands, and runs that name a
// server themselves, are left alone.
func (c CLI) viaServerArgs() []string {
	if !ViaServer() || len(c.Args) == 0 || c.Args[0] != "run" {
		return c.Args
	}
	for _, a := range c.Args[1:] {
		if a == "--" {
			break
		}
		if a == "--server" || strings.HasPrefix(a, "--server=") {
			return c.Args
		}
	}
	s, err := serverFor(c)
	if err != nil {
		// Command has no way to fail: the run is refused, with why.
		return append([]string{"run", "--server=/nonexistent/" + strings.ReplaceAll(err.Error(), "/", "_")}, c.Args[1:]...)
	}
	return append([]string{"run", "--server=" + s.Socket}, c.Args[1:]...)
}

// StopServers stops the servers ViaServer started.
func StopServers() {
	serversMu.Lock()
	defer serversMu.Unlock()
	for k, s := range servers {
		s.Stop()
		delete(servers, k)
	}
}
