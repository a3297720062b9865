//go:build linux

package proctree

import (
	"time"

	"golang.org/x/sys/unix"
)

// killEvery is how often a tree being killed is swept again: whatever was
// forked during a sweep is reparented to the subreaper root (or was still
// in its parent's fork) and is found by the next one.
const killEvery = 5 * time.Millisecond

// Ender ends one run's process tree, the same way for every supervisor of a
// run (the launcher's own, bubblewrap's supervisor process, the reaper):
// Terminate asks the tree to stop with SIGTERM; after the grace period (the
// caller selects on Grace and then calls Kill), or at once with Kill, it is
// killed, and swept again on every Tick until the caller has seen it gone.
// An Ender is used by one goroutine.
type Ender struct {
	term   func() int // sends SIGTERM; how many processes got it
	kill   func()     // one SIGKILL sweep
	sweeps bool       // kill sweeps repeat on Tick
	grace  time.Duration

	graceC <-chan time.Time
	ticker *time.Ticker
	// terminating: Terminate has run; killing: Kill has.
	terminating, killing bool
}

// EndTree ends every descendant of root, a child subreaper, except the
// processes in spare (which still get SIGKILL).
func EndTree(root int, grace time.Duration, spare ...int) *Ender {
	return &Ender{
		term:   func() int { return Signal(root, unix.SIGTERM, spare...) },
		kill:   func() { Signal(root, unix.SIGKILL) },
		sweeps: true,
		grace:  grace,
	}
}

// EndNamespace ends a PID namespace through its init, pid: the init passes
// SIGTERM on to every process of the namespace, and when it dies the kernel
// kills them all, so one SIGKILL is enough.
func EndNamespace(pid int, grace time.Duration) *Ender {
	return &Ender{
		term:  func() int { _ = unix.Kill(pid, unix.SIGTERM); return 1 },
		kill:  func() { _ = unix.Kill(pid, unix.SIGKILL) },
		grace: grace,
	}
}

// Terminate sends SIGTERM once and starts the grace period; with nothing
// to receive it, it kills at once. It reports false when the tree was
// already being ended.
func (e *Ender) Terminate() bool {
	if e.terminating || e.killing {
		return false
	}
	e.terminating = true
	if e.term() == 0 {
		e.Kill()
		return true
	}
	e.graceC = time.After(e.grace)
	return true
}

// Kill sweeps the tree with SIGKILL now, and then on every Tick.
func (e *Ender) Kill() {
	e.killing = true
	e.graceC = nil
	e.kill()
	if e.sweeps && e.ticker == nil {
		e.ticker = time.NewTicker(killEvery)
	}
}

// Killing reports whether Kill has run.
func (e *Ender) Killing() bool { return e.killing }

// Grace fires when the grace period after Terminate is over; the caller
// then calls Kill. Nil (never ready) otherwise.
func (e *Ender) Grace() <-chan time.Time { return e.graceC }

// Tick fires while a tree is being killed; the caller then calls Sweep.
// Nil (never ready) otherwise.
func (e *Ender) Tick() <-chan time.Time {
	if e.ticker == nil {
		return nil
	}
	return e.ticker.C
}

// Sweep sends SIGKILL through the tree once more.
func (e *Ender) Sweep() { e.kill() }

// Stop releases the ticker; call it once the tree is gone.
func (e *Ender) Stop() {
	if e.ticker != nil {
		e.ticker.Stop()
		e.ticker = nil
	}
}
