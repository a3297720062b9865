//go:build linux

package notify

import (
	"bytes"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/proctree"
)

// Bounding the run's tasks where nothing in the kernel does: uid 0 of the
// initial user namespace is exempt from RLIMIT_NPROC, and without a
// writable pids cgroup (a stock container run as root) the only place left
// to count is here. The filter (plan.Seccomp.NotifyFork) sends every
// clone without namespace flags, fork and vfork; clone3 is ENOSYS.
//
// Threads count, as they do for RLIMIT_NPROC and the pids cgroup: each is
// a kernel task holding a pid and kernel memory, and a thread bomb
// exhausts the pid space as surely as a fork bomb. So --max-procs means
// the same under all three mechanisms.
//
// The decision never depends on memory the task can change (clone's flags
// are in registers and were checked by the filter), so an allowed call is
// resumed with SECCOMP_USER_NOTIF_FLAG_CONTINUE and the kernel creates the
// task itself; a refused one fails with EAGAIN, as the kernel's own limit
// would.
//
// Counting exactly on every call would walk /proc each time. Instead the
// counter keeps an upper bound: the exact count taken at the last walk
// plus every creation allowed since (exits are not seen, so it only
// grows). Only when that bound would pass the limit does it walk again.
// A build far below the limit thus walks once per (limit - live tasks)
// creations; a fork bomb at the limit walks on every call, which only
// slows the bomb.
//
// Worst-case overshoot: none. Decisions are serialized, so no two calls
// pass on the same count. A walk can miss only a task that does not exist
// yet when the walk starts: one whose creation was allowed but whose
// clone has not finished (every other creation needs a decision, and the
// decision waits for the walk). Each such in-flight creation belongs to a
// task that got an allowance and has not been seen to leave that call;
// before each walk, every such task is checked (/proc/TID/syscall): gone,
// or blocked in another system call, it has finished (its child was
// attached before; the walk sees it), otherwise it counts as one more
// task. A task that issues its next notification has finished too. The
// kernel attaches a new task to its parent before it first runs, so no
// task can create another unseen; a process reparented during the walk is
// found under its new parent (proctree.Tasks), and orphans stay below the
// run's init, a child subreaper or a PID namespace's init. Errors
// (an unreadable /proc) refuse the call. The count can err only high (a
// task still running after its clone returned counts twice until it
// blocks or exits), which can refuse a creation somewhat before the limit
// when many tasks that forked are busy computing at once, never let the
// run pass it.

// forkCounter decides task creations for one run.
type forkCounter struct {
	mu   sync.Mutex
	root int // the run's init; its descendants are the run
	max  int
	// fresh is false until the first walk: tasks that existed before
	// the supervisor started are known only by walking.
	fresh bool
	base  int // tasks at the last walk, in-flight creations included
	since int // creations allowed since the last walk
	// unconfirmed holds the tids whose last allowed creation may not
	// have finished.
	unconfirmed map[int]struct{}
	walks       int // for tests
	buf         []byte
}

func newForkCounter(root, max int) *forkCounter {
	return &forkCounter{root: root, max: max, unconfirmed: map[int]struct{}{}, buf: make([]byte, 128)}
}

// decide says whether tid may create one more task now.
func (c *forkCounter) decide(tid int) result {
	c.mu.Lock()
	defer c.mu.Unlock()
	// tid is in a new system call: its previous one has returned.
	delete(c.unconfirmed, tid)
	if !c.fresh || c.base+c.since+1 > c.max {
		if err := c.walk(); err != nil {
			return deny(unix.EAGAIN, "bounded-processes: cannot count the run's tasks: "+err.Error(), "")
		}
		if c.base+1 > c.max {
			return deny(unix.EAGAIN, fmt.Sprintf("bounded-processes: the run holds or is creating %d tasks (threads included); the limit is %d", c.base, c.max), "")
		}
	}
	c.since++
	c.unconfirmed[tid] = struct{}{}
	return result{cont: true}
}

// walk counts the run's tasks exactly, plus the creations that may still
// be in flight (see above).
func (c *forkCounter) walk() error {
	pending := 0
	for tid := range c.unconfirmed {
		if c.mayBeCreating(tid) {
			pending++
		} else {
			delete(c.unconfirmed, tid)
		}
	}
	n, err := proctree.Tasks(c.root)
	if err != nil {
		return err
	}
	c.walks++
	c.fresh, c.base, c.since = true, n+pending, 0
	return nil
}

// mayBeCreating reports whether tid may still be inside the task creation
// it was allowed: false only when it is gone or blocked in another system
// call. "running" (on a CPU or runnable), a creating call (possibly that
// one, or the next, waiting for its own decision) or anything unreadable
// count as creating.
func (c *forkCounter) mayBeCreating(tid int) bool {
	fd, err := unix.Open("/proc/"+strconv.Itoa(tid)+"/syscall", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT || err == unix.ESRCH {
		return false
	}
	if err != nil {
		return true
	}
	n, err := unix.Read(fd, c.buf)
	unix.Close(fd)
	if err == unix.ESRCH {
		return false
	}
	if err != nil || n <= 0 {
		return true
	}
	f := bytes.Fields(c.buf[:n])
	if len(f) == 0 {
		return true
	}
	nr, err := strconv.Atoi(string(f[0]))
	if err != nil {
		return true // "running"
	}
	// -1: stopped outside any system call.
	return nr >= 0 && creating[int32(nr)]
}

// creating are the system calls that create tasks, by native number.
var creating = func() map[int32]bool {
	m := map[int32]bool{}
	for nr, e := range sysTable {
		if e.kind == sysFork {
			m[nr] = true
		}
	}
	return m
}()
