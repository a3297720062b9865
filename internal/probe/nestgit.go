//go:build linux

package probe

import (
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Vectors that plant a repository below a work tree's top level (the
// persistence guard's refusal of a new .git, issue 12): git started in
// that directory later obeys what the new .git holds.
func addNestGitVectors(v map[string]vector) {
	v["mkdir"] = vector{"PATH", 1, 1, vMkdir}
	v["symlink"] = vector{"TARGET LINK", 2, 2, vSymlink}
	v["gitfile"] = vector{"PATH GITDIR", 2, 2, vGitfile}
	v["name-race"] = vector{"DIR", 1, 1, vNameRace}
}

func vMkdir(args []string) result {
	if err := unix.Mkdir(args[0], 0o755); err != nil {
		return blocked("mkdir "+args[0], err)
	}
	return escaped("created directory %s", args[0])
}

func vSymlink(args []string) result {
	if err := unix.Symlink(args[0], args[1]); err != nil {
		return blocked("symlink "+args[1], err)
	}
	return escaped("created symlink %s -> %s", args[1], args[0])
}

// vGitfile writes a gitfile ("gitdir: GITDIR") at PATH with an O_CREAT open.
func vGitfile(args []string) result {
	fd, err := unix.Open(args[0], unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return blocked("open(O_CREAT) "+args[0], err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("gitdir: "+args[1]+"\n")); err != nil {
		return blocked("write "+args[0], err)
	}
	return escaped("wrote gitfile %s naming %s", args[0], args[1])
}

// raceRounds bounds vNameRace: enough for the flipping thread to land
// between a check and a use many times over (unconfined, about one call in
// two creates .git).
const raceRounds = 4000

// vNameRace creates DIR/xgit again and again, alternately with mkdir and
// with open(O_CREAT), while another thread flips the name's first byte
// between 'x' and '.': a supervisor that checks the name and then lets
// the kernel read it again creates DIR/.git. It escapes when DIR/.git
// exists after any round.
func vNameRace(args []string) result {
	dir := filepath.Clean(args[0])
	buf := append([]byte(filepath.Join(dir, "xgit")), 0)
	flip := &buf[len(dir)+1]
	git := filepath.Join(dir, ".git")
	var stop atomic.Bool
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer close(done)
		p := (*uint32)(unsafe.Pointer(uintptr(unsafe.Pointer(flip)) &^ 3))
		shift := 8 * (uintptr(unsafe.Pointer(flip)) & 3)
		for !stop.Load() {
			// Flip the byte with an atomic word operation (the other
			// bytes of the word keep their values).
			for {
				old := atomic.LoadUint32(p)
				b := byte(old >> shift)
				nb := byte('.')
				if b == '.' {
					nb = 'x'
				}
				if atomic.CompareAndSwapUint32(p, old, old&^(0xff<<shift)|uint32(nb)<<shift) {
					break
				}
			}
		}
	}()
	defer func() {
		stop.Store(true)
		<-done
	}()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ptr := uintptr(unsafe.Pointer(&buf[0]))
	cwd := unix.AT_FDCWD
	var created, refused int
	for i := 0; i < raceRounds; i++ {
		var e unix.Errno
		if i%2 == 0 {
			_, _, e = unix.Syscall(unix.SYS_MKDIRAT, uintptr(cwd), ptr, 0o755)
		} else {
			var fd uintptr
			fd, _, e = unix.Syscall6(unix.SYS_OPENAT, uintptr(cwd), ptr, unix.O_WRONLY|unix.O_CREAT|unix.O_CLOEXEC, 0o644, 0, 0)
			if e == 0 {
				unix.Close(int(fd))
			}
		}
		runtime.KeepAlive(buf)
		if e == 0 {
			created++
		} else {
			refused++
		}
		if _, err := os.Lstat(git); err == nil {
			return escaped("round %d created %s (%d creations, %d refusals)", i, git, created, refused)
		}
		for _, n := range []string{"xgit", ".git"} {
			p := filepath.Join(dir, n)
			if unix.Rmdir(p) != nil {
				_ = unix.Unlink(p)
			}
		}
	}
	return blockedf("%d rounds: %d creations of %s, %d refusals, never %s", raceRounds, created, filepath.Join(dir, "xgit"), refused, git)
}
