//go:build linux

// Package notify is confine's seccomp user-notification supervisor.
//
// Landlock does not govern chmod, chown, utimes, setxattr and removexattr,
// nor (before ABI 9) connect() to pathname unix sockets. The confined
// command's seccomp filter therefore returns SECCOMP_RET_USER_NOTIF for those
// system calls (see Syscalls), and the unconfined supervisor, the command's
// parent running as root or as the command's uid, answers them with Serve.
//
// An operation is allowed only when its target lies inside one of the run's
// writable roots (for connect: or is an allowlisted socket). The supervisor
// never lets the kernel resume an allowed call (SECCOMP_USER_NOTIF_FLAG_CONTINUE
// would re-read the task's memory and re-resolve its path after the check, a
// time-of-check/time-of-use hole). Instead it reads the arguments once from
// /proc/<tid>/mem, resolves the target once to a file descriptor of its own,
// checks where that object really is, and performs the operation itself on
// that descriptor, with the task's credentials and no capabilities.
//
// On old Landlock ABIs the filter also routes truncate(2) (ABI < 3) and
// rename and link (ABI 1) here; see files.go. A rename or link the
// supervisor does not perform itself is resumed in the kernel, where the
// command's own Landlock domain still checks it (the calls of
// proc_targets.go are resumed on their own terms).
//
// Task creation (clone, fork, vfork; plan.Plan.MaxTasks) is resumed too: its
// decision reads no memory, only a count of the run's tasks, so an allowed
// call is resumed by the kernel itself (see fork.go).
package notify

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/internal/plan"
)

// Config is what Serve enforces: the run's plan, which decides the
// policy, and the supervision's own handles.
type Config struct {
	// Plan is the run's plan; Serve reads, and never changes:
	//   - WritableRoots, the absolute, clean, symlink-free directories
	//     whose contents the command may modify;
	//   - SocketAllow, further absolute paths of unix sockets connect()
	//     may reach although they are outside every writable root;
	//   - Guarded, paths inside the writable roots the supervisor never
	//     writes, renames into or out of, truncates or changes the
	//     metadata of (the persistence guard's .git);
	//   - GuardRows, the rows besides git's the profile's [guard]
	//     refuses: a new entry matching one is refused (guardrows.go;
	//     with Create);
	//   - Backend: the core's Landlock keeps the entries of the
	//     directories on the way from a writable root to a guarded path
	//     fixed, so renames and links the supervisor performs on ABI 1
	//     must not create or remove entries there either; under any other
	//     backend (with namespaces a read-only mount guards the path
	//     instead) the command has its own mount namespace and root, and
	//     the paths of the metadata calls and truncate(2) are resolved in
	//     its tree, as those of creator.namespaced (inroot.go);
	//   - MaxTasks: when > 0 (plan.Seccomp.NotifyFork), the run's tasks
	//     (threads included) below Init are bounded: the task creations
	//     the filter sends fail with EAGAIN once the run holds that many
	//     (see fork.go). It needs Init.
	Plan *plan.Plan
	// AllowAbstract lets connect() reach abstract unix sockets. Without it
	// such connects fail with EPERM, as Landlock's scoping (ABI 6) would make
	// them fail had the command issued them itself.
	AllowAbstract bool
	// Init is the run's init: every process of the run descends from it
	// (a child subreaper, a PID namespace's init, or bwrap above one).
	// The handlers of calls that name another process (proc_targets.go)
	// let them reach its descendants only, and the plan's MaxTasks counts
	// the tasks below it. Without it those handlers reach none but the
	// caller and MaxTasks is refused.
	Init *Init
	// Stats, if not nil, receives a count of every decision and a record of
	// refused operations.
	Stats *Stats
	// Egress, when set, is network = "allowlist": internet TCP sockets
	// are made by the supervisor and connect only to Egress.Proxy (see
	// inet.go).
	Egress *Egress
	// Create, when set, refuses a new .git (see Create); the filter
	// then sends the calls that create names (plan.Seccomp.NotifyCreate).
	Create *Create
}

// Syscalls returns the names of the system calls Serve handles on the native
// architecture, sorted. The command's seccomp filter should return
// SECCOMP_RET_USER_NOTIF for them; Serve refuses (EACCES) any other call
// routed to it.
//
// The calls that create names (Config.Create) are not among them: see
// CreateSyscalls.
func Syscalls() []string {
	names := make([]string, 0, len(sysTable))
	for _, e := range sysTable {
		if !isCreateKind(e.kind) {
			names = append(names, e.name)
		}
	}
	slices.Sort(names)
	return names
}

// CreateSyscalls returns the names of the further system calls Serve
// handles with Config.Create (plan.Seccomp.NotifyCreate), sorted; rename
// and link are among Syscalls already.
func CreateSyscalls() []string {
	var names []string
	for _, e := range sysTable {
		if isCreateKind(e.kind) {
			names = append(names, e.name)
		}
	}
	slices.Sort(names)
	return names
}

// workers is the number of notifications handled concurrently. A handler can
// block (connect() to a unix socket whose backlog is full blocks like the
// command's own call would, and so does an O_CREAT open of a FIFO), so one
// slow call must not stall the others.
const workers = 4

// server is shared by the workers. Each worker waits on one epoll instance
// they share, where the listener is registered one-shot
// (EPOLLONESHOT): a notification wakes exactly one waiting worker, which
// receives it, re-arms the listener (so that the next notification, if
// any, wakes another) and handles the call on its own thread. A handler
// that blocks thus never holds up the others, and no call pays for
// passing a role between threads: before, a leader holding a mutex woke a
// follower to take over the polling before every call that could block
// (every file call), and blocked on the mutex when done, two switches
// between the Go runtime's locked threads per call (a third of the
// supervisor's time per trapped call under the persistence guard).
type server struct {
	pol       policy
	creator   *creator     // nil: no creation calls expected
	forks     *forkCounter // nil: no bound on task creation
	listener  int          // Serve's own duplicate of the listener descriptor
	wake      int          // eventfd, readable once the workers must stop
	ep        int          // epoll instance: listener (one-shot) and wake
	stats     *Stats
	notifSize int
	respSize  int
	// credGen moves on at every umask and setgroups of any task
	// (credChanged): what a handler keeps of a status read before is
	// stale (proc.go, keptStatus). Starts at 1 (0: nothing kept).
	credGen atomic.Uint64

	done  atomic.Bool
	errMu sync.Mutex
	err   error // guarded by errMu: why the workers stopped
	wg    sync.WaitGroup

	// Workers start as needed (most runs get no notification, and each
	// worker costs a thread): started so far, and how many wait in
	// epoll_wait.
	started atomic.Int32
	idle    atomic.Int32
}

// Serve answers the notifications arriving on listenerFD, the descriptor
// returned by seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER).
//
// It returns nil once every task using the filter is gone, or ctx.Err() when
// ctx is cancelled. Serve works on a duplicate of listenerFD and never closes
// the caller's descriptor; once Serve has returned, the caller should close
// it: the kernel then fails pending and future notified calls with ENOSYS.
//
// Serve waits for handlers still running before it returns; after
// cancellation it waits only briefly, and a handler still blocked then (only
// connect() can block) finishes on its own, keeping its own duplicate of the
// listener until then.
//
// Side effect: the handlers switch the effective ids of their threads, which
// makes the kernel mark the supervisor process non-dumpable (see
// threadCreds).
func Serve(ctx context.Context, listenerFD int, cfg Config) error {
	pol, err := newPolicy(cfg)
	if err != nil {
		return err
	}
	var forks *forkCounter
	if max := cfg.Plan.MaxTasks(); max > 0 {
		if cfg.Init == nil || cfg.Init.Pid <= 0 {
			return fmt.Errorf("notify: MaxTasks %d without the run's init", max)
		}
		forks = newForkCounter(cfg.Init.Pid, max)
	}
	sizes, err := notifSizes()
	if err != nil {
		return fmt.Errorf("notify: SECCOMP_GET_NOTIF_SIZES: %w", err)
	}
	lfd, err := unix.FcntlInt(uintptr(listenerFD), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("notify: dup listener: %w", err)
	}
	syncWakeUp(lfd)
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(lfd)
		return fmt.Errorf("notify: eventfd: %w", err)
	}
	ep, err := newEpoll(lfd, wake)
	if err != nil {
		unix.Close(lfd)
		unix.Close(wake)
		return err
	}
	s := &server{
		pol:       pol,
		creator:   newCreator(cfg.Create, cfg.Plan),
		forks:     forks,
		listener:  lfd,
		wake:      wake,
		ep:        ep,
		stats:     cfg.Stats,
		notifSize: int(sizes.Notif),
		respSize:  int(sizes.Resp),
	}
	s.credGen.Store(1)
	s.started.Store(1)
	s.wg.Add(1)
	go s.worker()
	// The descriptors live as long as any handler may still use them.
	allDone := make(chan struct{})
	go func() {
		s.wg.Wait()
		s.creator.close()
		unix.Close(ep)
		unix.Close(lfd)
		unix.Close(wake)
		close(allDone)
	}()
	select {
	case <-allDone:
	case <-ctx.Done():
		s.stop(nil)
		select {
		case <-allDone:
		case <-time.After(stopGrace):
		}
		return ctx.Err()
	}
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// newEpoll makes the workers' epoll instance: the listener one-shot (each
// notification wakes one worker, which re-arms it), the wake eventfd
// level-triggered (once written it wakes every worker in turn).
func newEpoll(listener, wake int) (int, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("notify: epoll_create1: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, listener, &unix.EpollEvent{Events: listenerEvents, Fd: int32(listener)}); err != nil {
		unix.Close(ep)
		return -1, fmt.Errorf("notify: epoll_ctl listener: %w", err)
	}
	if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(wake)}); err != nil {
		unix.Close(ep)
		return -1, fmt.Errorf("notify: epoll_ctl eventfd: %w", err)
	}
	return ep, nil
}

const listenerEvents = unix.EPOLLIN | unix.EPOLLONESHOT

// stop makes every worker stop when it next waits, recording why (nil:
// the tasks are gone or Serve was cancelled). The first reason is kept.
func (s *server) stop(err error) {
	s.errMu.Lock()
	if !s.done.Load() {
		s.err = err
		s.done.Store(true)
	}
	s.errMu.Unlock()
	// The eventfd stays readable: every worker sees it when it next
	// waits, and stops.
	one := [8]byte{1}
	unix.Write(s.wake, one[:])
}

// stopGrace is how long Serve waits, after cancellation, for handlers to
// finish before returning without them.
const stopGrace = 100 * time.Millisecond

// next waits for the next notification and receives it into buf. It
// reports false when the workers must stop.
func (s *server) next(buf []uint64) bool {
	s.idle.Add(1)
	defer s.idle.Add(-1)
	for !s.done.Load() {
		ok, err := s.recv(buf)
		if ok {
			return true
		}
		if err != nil {
			if err == errStop {
				err = nil
			}
			s.stop(err)
		}
	}
	return false
}

var errStop = errors.New("stop")

// recv waits on the epoll instance once. It returns true with a
// notification in buf, false with a nil error to be called again, or an
// error (errStop when the filter's tasks are all gone or the workers must
// stop).
func (s *server) recv(buf []uint64) (bool, error) {
	var evs [1]unix.EpollEvent
	n, err := unix.EpollWait(s.ep, evs[:], -1)
	switch {
	case err == unix.EINTR || err == nil && n == 0:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("notify: epoll_wait: %w", err)
	case evs[0].Fd == int32(s.wake):
		return false, errStop
	}
	// The listener, disarmed until re-armed below.
	re := evs[0].Events
	switch {
	case re&unix.EPOLLIN != 0:
		// The kernel insists on a zeroed buffer.
		clear(buf)
		e := ioctlPtr(s.listener, ioctlNotifRecv, unsafe.Pointer(&buf[0]))
		// Re-armed only now: the notification received is no longer
		// pending, so the next one (already there or not) wakes
		// another worker.
		if err := s.rearm(); err != nil {
			return false, err
		}
		switch e {
		case 0:
			return true, nil
		case unix.ENOENT, unix.EINTR:
			// The task was interrupted or killed between the wake-up
			// and the receive; its notification is gone.
			return false, nil
		default:
			return false, fmt.Errorf("notify: SECCOMP_IOCTL_NOTIF_RECV: %w", e)
		}
	case re&(unix.EPOLLHUP|unix.EPOLLERR) != 0:
		// Every task using the filter has exited.
		return false, errStop
	}
	return false, s.rearm()
}

// rearm makes the listener wake a worker again.
func (s *server) rearm() error {
	if err := unix.EpollCtl(s.ep, unix.EPOLL_CTL_MOD, s.listener, &unix.EpollEvent{Events: listenerEvents, Fd: int32(s.listener)}); err != nil {
		return fmt.Errorf("notify: epoll_ctl re-arm: %w", err)
	}
	return nil
}

// grow starts another worker when a notification is being handled and no
// other worker waits for the next one, up to workers.
func (s *server) grow() {
	if s.idle.Load() > 0 {
		return
	}
	for {
		n := s.started.Load()
		if n >= workers {
			return
		}
		if s.started.CompareAndSwap(n, n+1) {
			// The calling worker holds a count: Add may race Wait.
			s.wg.Add(1)
			go s.worker()
			return
		}
	}
}

// worker receives and handles notifications on an OS thread of its own, whose
// credentials it switches per request. It never unlocks the thread: when the
// goroutine returns, the Go runtime destroys the thread instead of reusing
// it, so a thread whose credentials could not be restored dies with it.
func (s *server) worker() {
	runtime.LockOSThread()
	defer s.wg.Done()
	var h handler
	defer func() { h.stopConfined(); h.closeTaskFiles() }()
	tc, err := newThreadCreds()
	if err != nil {
		// Without a credential record nothing can be done safely: refuse.
		tc = &threadCreds{poisoned: true}
	}
	nbuf := alignedBuf(s.notifSize, int(unsafe.Sizeof(seccompNotif{})))
	n := (*seccompNotif)(unsafe.Pointer(&nbuf[0]))
	rbuf := alignedBuf(s.respSize, int(unsafe.Sizeof(seccompNotifResp{})))
	resp := (*seccompNotifResp)(unsafe.Pointer(&rbuf[0]))
	h = handler{s: s, tc: tc, status: make([]byte, 4096)}
	if s.creator != nil {
		// Refused by Docker's default seccomp profile: then the
		// task's umask is applied by hand (create.go, modeFor).
		h.ownFS = unix.Unshare(unix.CLONE_FS) == nil
	}
	for s.next(nbuf) {
		s.grow()
		r := h.handle(n)
		clear(rbuf)
		resp.ID = n.ID
		switch {
		case r.cont:
			resp.Flags = unix.SECCOMP_USER_NOTIF_FLAG_CONTINUE
		case r.errno != 0:
			resp.Error = -int32(r.errno)
		default:
			resp.Val = r.val
		}
		// ENOENT: the task was interrupted meanwhile; nobody waits for
		// the answer any more.
		_ = ioctlPtr(s.listener, ioctlNotifSend, unsafe.Pointer(resp))
		s.stats.record(n.Data.Nr, int(n.PID), r)
		if tc.poisoned {
			// Replace this worker; its thread ends with the goroutine.
			s.wg.Add(1)
			go s.worker()
			return
		}
	}
}

// policy is the validated Config.
type policy struct {
	roots         []string
	guarded       []string
	rows          []guardset.Entry // plan.Plan.GuardRows
	fixed         []string         // directories whose entries only Landlock may change (the core)
	namespaced    bool             // the backend is not the core
	sockets       map[string]bool
	allowAbstract bool
	init          *Init
	egress        *Egress
}

func newPolicy(cfg Config) (policy, error) {
	if cfg.Plan == nil {
		return policy{}, errors.New("notify: no plan")
	}
	pl := cfg.Plan
	core := pl.Backend == plan.BackendCore
	p := policy{sockets: map[string]bool{}, allowAbstract: cfg.AllowAbstract, init: cfg.Init, egress: cfg.Egress, namespaced: !core, rows: guardRows(pl.GuardRows)}
	if err := checkEgress(cfg.Egress); err != nil {
		return p, err
	}
	for _, r := range pl.WritableRoots {
		if !filepath.IsAbs(r) {
			return p, fmt.Errorf("notify: writable root %q is not absolute", r)
		}
		p.roots = append(p.roots, filepath.Clean(r))
	}
	for _, g := range pl.Guarded {
		if !filepath.IsAbs(g) {
			return p, fmt.Errorf("notify: guarded path %q is not absolute", g)
		}
		g = filepath.Clean(g)
		p.guarded = append(p.guarded, g)
		if !core {
			continue
		}
		for d := filepath.Dir(g); ; d = filepath.Dir(d) {
			if !p.inRoots(d) {
				break
			}
			p.fixed = append(p.fixed, d)
			if slices.Contains(p.roots, d) || d == "/" {
				break
			}
		}
	}
	for _, s := range pl.SocketAllow {
		if !filepath.IsAbs(s) {
			return p, fmt.Errorf("notify: socket path %q is not absolute", s)
		}
		s = filepath.Clean(s)
		p.sockets[s] = true
		// Targets are compared by their real path; accept the resolved
		// form of an allowlisted path that goes through a symlink.
		if r, err := filepath.EvalSymlinks(s); err == nil {
			p.sockets[r] = true
		}
	}
	return p, nil
}

// writable reports whether the real path p lies inside a writable root
// and outside every guarded path. p comes from the kernel (d_path), so it
// is absolute and clean unless the object has no path name or is
// unreachable from our root, in which case it does not start with '/' and
// is refused.
func (p *policy) writable(real string) bool {
	if !p.inRoots(real) {
		return false
	}
	for _, g := range p.guarded {
		if beneath(real, g) {
			return false
		}
	}
	return true
}

// inRoots reports whether real lies inside a writable root.
func (p *policy) inRoots(real string) bool {
	if len(real) == 0 || real[0] != '/' {
		return false
	}
	for _, r := range p.roots {
		if beneath(real, r) {
			return true
		}
	}
	return false
}

// entryWritable reports whether the supervisor may add, remove or replace
// the entry last (one component, trailing slashes allowed) of directory
// real: the directory is writable and, where it is one whose entries
// Landlock grants one by one around a guarded path (fixed: the core), the
// entry is neither a guarded path nor a directory on the way to one. Names
// are compared without regard to case there: a casefolded directory
// resolves any spelling to the guarded entry.
func (p *policy) entryWritable(real, last string) bool {
	if !p.writable(real) {
		return false
	}
	if !slices.Contains(p.fixed, real) {
		return true
	}
	name := strings.TrimRight(last, "/")
	if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
		return false
	}
	for _, set := range [][]string{p.guarded, p.fixed} {
		for _, g := range set {
			if filepath.Dir(g) == real && strings.EqualFold(filepath.Base(g), name) {
				return false
			}
		}
	}
	return true
}

// guarding says the persistence guard keeps paths of this run.
func (p *policy) guarding() bool { return len(p.guarded) > 0 }

// holdsGit says the entry name of directory dir (a descriptor) is a
// directory holding a .git of its own, or one of the guarded paths: moved,
// it would carry a repository git did not see there before (into a
// submodule's path, say), or take a guarded path out of its place.
func (p *policy) holdsGit(dir int, name string) bool {
	name = strings.TrimRight(name, "/")
	if name == "" || name == "." || name == ".." {
		return false
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_BENEATH}
	fd, err := unix.Openat2(dir, name, &how)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	if real, ok := fdPath(fd); ok {
		for _, g := range p.guarded {
			if beneath(g, real) {
				return true
			}
		}
	}
	var gst unix.Stat_t
	return unix.Fstatat(fd, ".git", &gst, unix.AT_SYMLINK_NOFOLLOW) == nil
}

// beneath says p is dir or lies inside it.
func beneath(p, dir string) bool {
	return dir == "/" || p == dir || (len(p) > len(dir) && p[:len(dir)] == dir && p[len(dir)] == '/')
}

// socketAllowed: connecting is not writing, so a socket inside a guarded
// path (git's fsmonitor daemon's) is as reachable as the rest of the
// writable roots.
func (p *policy) socketAllowed(real string) bool {
	return p.inRoots(real) || p.sockets[real]
}

// Stats counts the supervisor's decisions per system call and keeps the most
// recent refusals, for "why was my command denied?" reports. The zero value is
// ready to use; a Stats is safe for concurrent use.
type Stats struct {
	mu      sync.Mutex
	counts  map[string]*Counts
	denials []Denial
	next    int // ring position once denials is full
}

// Counts are the outcomes for one system call.
type Counts struct {
	// Allowed operations passed the policy and were performed successfully.
	Allowed uint64
	// Failed operations passed the policy (or never got to it) but failed
	// with an ordinary error, e.g. ENOENT or a permission the task lacks.
	Failed uint64
	// Denied operations were refused by the policy.
	Denied uint64
}

// Denial describes one operation the policy refused.
type Denial struct {
	Syscall string
	PID     int // thread id of the caller, in the supervisor's pid namespace
	// Path is the real path of the target when it was resolved, else the
	// path or address as the task passed it (may be empty).
	Path   string
	Errno  syscall.Errno
	Reason string
}

// maxDenials bounds the memory Stats keeps; older refusals are overwritten.
const maxDenials = 256

// Counts returns a copy of the counters, keyed by system call name.
func (s *Stats) Counts() map[string]Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Counts, len(s.counts))
	for k, v := range s.counts {
		out[k] = *v
	}
	return out
}

// Denials returns the recorded refusals, oldest first.
func (s *Stats) Denials() []Denial {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Denial, 0, len(s.denials))
	out = append(out, s.denials[s.next:]...)
	return append(out, s.denials[:s.next]...)
}

func (s *Stats) record(nr int32, pid int, r result) {
	if s == nil {
		return
	}
	name := "unknown"
	if e, ok := sysTable[nr]; ok {
		name = e.name
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]*Counts{}
	}
	c := s.counts[name]
	if c == nil {
		c = &Counts{}
		s.counts[name] = c
	}
	switch {
	case r.denied:
		c.Denied++
		d := Denial{Syscall: name, PID: pid, Path: r.path, Errno: syscall.Errno(r.errno), Reason: r.reason}
		if len(s.denials) < maxDenials {
			s.denials = append(s.denials, d)
		} else {
			s.denials[s.next] = d
			s.next = (s.next + 1) % maxDenials
		}
	case r.errno != 0:
		c.Failed++
	default:
		c.Allowed++
	}
}

// guardRows are plan's refused rows as guardset's.
func guardRows(rows []plan.GuardRow) []guardset.Entry {
	var out []guardset.Entry
	for _, r := range rows {
		out = append(out, guardset.Entry{Name: r.Name, Class: guardset.Profile, Pattern: r.Pattern, Default: guardset.Refuse, Why: r.Why})
	}
	return out
}
