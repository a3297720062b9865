//go:build linux

package landlock

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"github.com/confine-sandbox/confine/internal/plan"
	"golang.org/x/sys/unix"
)

// The tests re-exec the test binary as a child that confines itself the way
// stage 2 does (locked thread, Prepare, RestrictSelf) and then performs
// operations, so enforcement is observed for real.
const childEnv = "CONFINE_LANDLOCK_TEST_CHILD"

// childSpec is handed to the child as JSON in childEnv.
type childSpec struct {
	// Mode: "control" runs the ops unconfined, "confined" after
	// RestrictSelf, "exec" confines and then execve()s Argv.
	Mode   string
	Policy plan.Landlock
	// Guarded is Prepare's guarded.
	Guarded []string
	Ops     []op
	Argv    []string
	Env     []string
}

// op is one probe. Kind selects the system call(s); Path/Path2, Port and
// Pid are its arguments.
type op struct {
	Name  string
	Kind  string
	Path  string
	Path2 string
	Port  int
	Pid   int
}

func init() {
	if os.Getenv(childEnv) == "" {
		return
	}
	// As in stage 2: the main goroutine stays on the main thread, which
	// is restricted and later execs or forks. TestMain then dispatches.
	runtime.LockOSThread()
}

func childMain(raw string) int {
	var s childSpec
	if err := json.Unmarshal([]byte(raw), &s); err != nil {
		fmt.Fprintln(os.Stderr, "child: bad spec:", err)
		return 2
	}
	if s.Mode != "control" {
		r, err := Prepare(s.Policy, s.Guarded, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: prepare:", err)
			return 2
		}
		if err := r.RestrictSelf(); err != nil {
			fmt.Fprintln(os.Stderr, "child: restrict:", err)
			return 2
		}
		r.Close()
	}
	if s.Mode == "exec" {
		path, err := exec.LookPath(s.Argv[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, "child: lookpath:", err)
			return 127
		}
		err = syscall.Exec(path, s.Argv, s.Env)
		fmt.Fprintln(os.Stderr, "child: exec:", err)
		return 126
	}
	res := make(map[string]string, len(s.Ops))
	for _, o := range s.Ops {
		res[o.Name] = outcome(runOp(o))
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 2
	}
	return 0
}

// outcome renders an error as "ok", an errno name or a short message.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return fmt.Sprintf("exit %d", ee.ExitCode())
	}
	var en unix.Errno
	if errors.As(err, &en) {
		if name := unix.ErrnoName(en); name != "" {
			return name
		}
	}
	return err.Error()
}

func openClose(path string, flags int, mode uint32) error {
	fd, err := unix.Open(path, flags|unix.O_CLOEXEC, mode)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

func runOp(o op) error {
	switch o.Kind {
	case "read":
		return openClose(o.Path, unix.O_RDONLY, 0)
	case "list":
		return openClose(o.Path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	case "write":
		return openClose(o.Path, unix.O_WRONLY, 0)
	case "create":
		return openClose(o.Path, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, 0o644)
	case "trunc-open":
		return openClose(o.Path, unix.O_WRONLY|unix.O_TRUNC, 0)
	case "truncate":
		return unix.Truncate(o.Path, 0)
	case "rdwr":
		fd, err := unix.Open(o.Path, unix.O_RDWR|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if _, err := unix.Write(fd, []byte("x")); err != nil {
			return err
		}
		_, err = unix.Read(fd, make([]byte, 1))
		return err
	case "rename":
		return unix.Rename(o.Path, o.Path2)
	case "link":
		return unix.Link(o.Path, o.Path2)
	case "unlink":
		return unix.Unlink(o.Path)
	case "mkdir":
		return unix.Mkdir(o.Path, 0o755)
	case "symlink":
		return unix.Symlink("target", o.Path)
	case "mkfifo":
		return unix.Mknod(o.Path, unix.S_IFIFO|0o644, 0)
	case "mknod-chr":
		return unix.Mknod(o.Path, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 3)))
	case "exec":
		return exec.Command(o.Path).Run()
	case "sh":
		return exec.Command("/bin/sh", "-c", o.Path).Run()
	case "tcp-connect":
		return sockOp(unix.AF_INET, func(fd int) error {
			return unix.Connect(fd, &unix.SockaddrInet4{Port: o.Port, Addr: [4]byte{127, 0, 0, 1}})
		})
	case "tcp-bind":
		return sockOp(unix.AF_INET, func(fd int) error {
			return unix.Bind(fd, &unix.SockaddrInet4{Port: 0, Addr: [4]byte{127, 0, 0, 1}})
		})
	case "unix-connect":
		// Path starting with "@" names an abstract socket.
		return sockOp(unix.AF_UNIX, func(fd int) error {
			return unix.Connect(fd, &unix.SockaddrUnix{Name: o.Path})
		})
	case "chmod":
		return unix.Chmod(o.Path, 0o600)
	case "chown":
		return unix.Chown(o.Path, o.Pid, o.Pid)
	case "utimes":
		return unix.UtimesNano(o.Path, []unix.Timespec{{Nsec: unix.UTIME_NOW}, {Nsec: unix.UTIME_NOW}})
	case "setxattr":
		return unix.Setxattr(o.Path, "user.confine", []byte("x"), 0)
	case "stat":
		var st unix.Stat_t
		return unix.Stat(o.Path, &st)
	case "readlink":
		_, err := os.Readlink(o.Path)
		return err
	case "kill0":
		return unix.Kill(o.Pid, 0)
	}
	return fmt.Errorf("unknown op kind %q", o.Kind)
}

func sockOp(family int, f func(fd int) error) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return f(fd)
}
