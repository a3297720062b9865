//go:build linux

package nsinit

import (
	"errors"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// netOf is the network namespace of the calling thread.
func netOf(t *testing.T) string {
	t.Helper()
	s, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// loUp says whether lo is up in the calling thread's network namespace.
func loUp(t *testing.T) bool {
	t.Helper()
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlIfreq(s, unix.SIOCGIFFLAGS, ifr); err != nil {
		t.Fatal(err)
	}
	return ifr.Uint16()&unix.IFF_UP != 0
}

// Each namespace the pool gives is new (not the launcher's, not one given
// before), has its loopback up, and Join leaves the thread in the
// launcher's namespace again; a process that may not make one gets no
// pool and an error that says so.
func TestNetPool(t *testing.T) {
	p, err := NewNetPool()
	if os.Geteuid() != 0 {
		if err == nil || !errors.Is(err, ErrNetPool) {
			t.Fatalf("uid %d: NewNetPool gave %v, %v; want no pool and ErrNetPool", os.Geteuid(), p, err)
		}
		t.Skipf("uid %d may not make network namespaces to join: %v", os.Geteuid(), err)
	}
	if err != nil {
		t.Fatal(err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home := netOf(t)
	seen := map[string]bool{home: true}
	for i := range 5 {
		ns := p.Take()
		for ns == nil {
			runtime.Gosched() // the maker is filling the pool
			ns = p.Take()
		}
		var in string
		var up bool
		err := p.Join(ns, func() error { in, up = netOf(t), loUp(t); return nil })
		ns.Close()
		if err != nil {
			t.Fatal(err)
		}
		if seen[in] {
			t.Fatalf("namespace %d is %s, the launcher's or one given before (%v)", i, in, seen)
		}
		seen[in] = true
		if !up {
			t.Errorf("namespace %d (%s): lo is down", i, in)
		}
		if got := netOf(t); got != home {
			t.Fatalf("after Join the thread is in %s, want the launcher's %s", got, home)
		}
	}
	// Join returns clone's own error.
	ns := p.Take()
	for ns == nil {
		runtime.Gosched()
		ns = p.Take()
	}
	want := errors.New("clone failed")
	if err := p.Join(ns, func() error { return want }); err != want {
		t.Errorf("Join returned %v, want clone's error", err)
	}
	ns.Close()
	p.Close()
	p.Close()
	if ns := p.Take(); ns != nil {
		t.Errorf("Take after Close gave %s", ns.Name())
	}
	var nilPool *NetPool
	if nilPool.Take() != nil {
		t.Error("a nil pool gave a namespace")
	}
	nilPool.Close()
}
