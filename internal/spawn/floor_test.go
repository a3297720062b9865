//go:build linux

package spawn

import (
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// The floor of a launch: fork, exec /bin/true and reap it, with no
// confinement, and then with each namespace the namespaces provider adds
// (creation and teardown are both in the figure), against os/exec.
func benchClone(b *testing.B, flags uintptr) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < b.N; i++ {
		p := &Program{Cloneflags: flags}
		if err := p.SetExec("/bin/true", []string{"true"}, nil); err != nil {
			b.Fatal(err)
		}
		var r, w *os.File
		if flags&unix.CLONE_NEWPID != 0 {
			var err error
			if r, w, err = os.Pipe(); err != nil {
				b.Fatal(err)
			}
			p.Init = []Op{Call(1, unix.SYS_DUP3, w.Fd(), FDExit, 0)}
		}
		pid, err := p.Start()
		if err != nil {
			b.Skipf("clone(%#x) not possible here: %v", flags, err)
		}
		if w != nil {
			w.Close()
		}
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, unix.WALL, nil); err != nil || ws.ExitStatus() != 0 {
			b.Fatalf("wait: %v %v", ws, err)
		}
		if r != nil {
			r.Close()
		}
		p.Close()
	}
}

const userPID = unix.CLONE_NEWUSER | unix.CLONE_NEWPID

func BenchmarkOSExec(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if err := exec.Command("/bin/true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}
func BenchmarkCloneNone(b *testing.B)    { benchClone(b, 0) }
func BenchmarkCloneUserPID(b *testing.B) { benchClone(b, userPID) }
func BenchmarkCloneIPC(b *testing.B)     { benchClone(b, userPID|unix.CLONE_NEWIPC) }
func BenchmarkCloneUTS(b *testing.B)     { benchClone(b, userPID|unix.CLONE_NEWUTS) }
func BenchmarkCloneMount(b *testing.B)   { benchClone(b, userPID|unix.CLONE_NEWNS) }
func BenchmarkCloneNet(b *testing.B)     { benchClone(b, userPID|unix.CLONE_NEWNET) }
func BenchmarkCloneAll(b *testing.B) {
	benchClone(b, userPID|unix.CLONE_NEWNS|unix.CLONE_NEWNET|unix.CLONE_NEWIPC|unix.CLONE_NEWUTS)
}
