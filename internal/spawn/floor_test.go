package spawn

import (
	"os"
	"runtime"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func benchFlags(b *testing.B, flags uintptr, init bool) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < b.N; i++ {
		p := &Program{Cloneflags: flags}
		p.SetExec("/bin/true", []string{"true"}, nil)
		var r, w *os.File
		if init {
			r, w, _ = os.Pipe()
			p.Init = []Op{Call(1, unix.SYS_DUP3, w.Fd(), FDExit, 0)}
		}
		pid, err := p.Start()
		if err != nil {
			b.Fatal(err)
		}
		if w != nil {
			w.Close()
		}
		var ws syscall.WaitStatus
		syscall.Wait4(pid, &ws, unix.WALL, nil)
		if r != nil {
			r.Close()
		}
		p.Close()
	}
}

const up = unix.CLONE_NEWUSER | unix.CLONE_NEWPID

func BenchmarkNoNS(b *testing.B) { benchFlags(b, 0, false) }
func BenchmarkUP(b *testing.B)   { benchFlags(b, up, true) }
func BenchmarkUPipc(b *testing.B) { benchFlags(b, up|unix.CLONE_NEWIPC, true) }
func BenchmarkUPuts(b *testing.B) { benchFlags(b, up|unix.CLONE_NEWUTS, true) }
func BenchmarkUPns(b *testing.B)  { benchFlags(b, up|unix.CLONE_NEWNS, true) }
func BenchmarkUPnet(b *testing.B) { benchFlags(b, up|unix.CLONE_NEWNET, true) }
