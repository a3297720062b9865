//go:build linux

package nsinit

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

// ErrNetPool is wrapped by the errors of NetPool.Join.
var ErrNetPool = errors.New("nsinit: network namespace pool")

// NetPool makes network namespaces ahead for a long-lived launcher (a
// server): each with its loopback up, each handed to exactly one run, whose
// init is then cloned into it instead of into a new one (the clone's
// copy_net_ns and the init's loopback set-up leave the run's path).
//
// Only a launcher that may join a network namespace it made in its own
// user namespace has one: setns(CLONE_NEWNET) needs CAP_SYS_ADMIN over the
// namespace and in the caller's user namespace, so in practice root.
// The namespaces belong to the launcher's user namespace, not the run's:
// the run's processes hold no capability over them (they could not
// configure its interfaces or sysctls, where with a namespace of their own
// their user namespace's root could). Nothing else differs: a fresh
// namespace with only a loopback, used once, released when the run's
// processes are gone.
//
// The zero value is not usable: NewNetPool. It is safe for concurrent use.
type NetPool struct {
	ready chan *os.File
	stop  chan struct{}
	home  *os.File // the launcher's own network namespace, to go back to
	once  sync.Once
	wg    sync.WaitGroup
}

// netPoolSize is how many namespaces wait ahead.
const netPoolSize = 2

// NewNetPool starts a pool, or returns nil with why when this process
// cannot use one (not privileged over its network namespace, no network
// namespaces).
func NewNetPool() (*NetPool, error) {
	home, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNetPool, err)
	}
	p := &NetPool{ready: make(chan *os.File, netPoolSize), stop: make(chan struct{}), home: home}
	first := make(chan error, 1)
	p.wg.Add(1)
	go p.maker(first)
	if err := <-first; err != nil {
		p.wg.Wait()
		home.Close()
		return nil, err
	}
	return p, nil
}

// maker runs on a thread of its own that it never gives back: the thread
// moves into each namespace it makes (unshare), and the Go runtime
// destroys it when maker returns. It reports the first namespace's
// success on first.
func (p *NetPool) maker(first chan<- error) {
	defer p.wg.Done()
	runtime.LockOSThread()
	// Its own filesystem attributes: nothing of the process's changes.
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		first <- fmt.Errorf("%w: unshare(CLONE_FS): %v", ErrNetPool, err)
		return
	}
	for i := 0; ; i++ {
		ns, err := makeNet()
		if i == 0 {
			first <- err
		}
		if err != nil {
			return
		}
		select {
		case p.ready <- ns:
		case <-p.stop:
			ns.Close()
			return
		}
	}
}

// makeNet moves the calling thread into a new network namespace, brings
// its loopback up and returns a descriptor of it.
func makeNet() (*os.File, error) {
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return nil, fmt.Errorf("%w: unshare(CLONE_NEWNET): %v", ErrNetPool, err)
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNetPool, err)
	}
	return f, nil
}

// loopbackUp sets IFF_UP on lo of the calling thread's network namespace,
// as the init's loopback ops do (program.namespaceOps).
func loopbackUp() error {
	s, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: loopback: %v", ErrNetPool, err)
	}
	defer unix.Close(s)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("%w: loopback: %v", ErrNetPool, err)
	}
	ifr.SetUint16(unix.IFF_UP)
	if err := unix.IoctlIfreq(s, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("%w: loopback up: %v", ErrNetPool, err)
	}
	return nil
}

// Take returns a namespace made ahead, never given out before, or nil
// when none is ready (the run then makes its own). The caller closes it
// once the run's init was cloned into it.
func (p *NetPool) Take() *os.File {
	if p == nil {
		return nil
	}
	select {
	case f := <-p.ready:
		return f
	default:
		return nil
	}
}

// Join runs clone with the calling thread in ns, then moves the thread
// back into the launcher's namespace, and returns clone's error. The
// caller must hold the thread (runtime.LockOSThread). When the thread
// could not join ns, clone does not run; when the way back fails, Join
// locks the thread once more, so that the runtime destroys it with the
// goroutine instead of running other goroutines in ns (clone did run:
// the caller ends what it started). Both errors wrap ErrNetPool.
func (p *NetPool) Join(ns *os.File, clone func() error) error {
	if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("%w: setns: %v", ErrNetPool, err)
	}
	cerr := clone()
	if err := unix.Setns(int(p.home.Fd()), unix.CLONE_NEWNET); err != nil {
		runtime.LockOSThread()
		return fmt.Errorf("%w: back to the launcher's namespace: %v", ErrNetPool, err)
	}
	return cerr
}

// Close stops making namespaces and releases those not taken.
func (p *NetPool) Close() {
	if p == nil {
		return
	}
	p.once.Do(func() {
		close(p.stop)
		p.wg.Wait()
		for {
			select {
			case f := <-p.ready:
				f.Close()
			default:
				p.home.Close()
				return
			}
		}
	})
}
