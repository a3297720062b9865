//go:build linux

package spawn

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Step identifies what an op was for in a failure report.
type Step uint16

// Op is one prepared system call.
type Op struct {
	nr   uintptr
	args [6]uintptr
	// fromSlot replaces args[slotArg] with slots[fromSlot] (when >= 0).
	fromSlot, slotArg int8
	// toSlot stores the result in slots[toSlot] (when >= 0).
	toSlot int8
	// storeAt, when set, receives the result (a field of a prepared
	// struct: a landlock rule's parent fd, an SCM_RIGHTS fd).
	storeAt *int32
	// okErrno is accepted as success (anyErrno: every error).
	okErrno syscall.Errno
	// skipErrno skips the next skip ops (an optional path that is missing).
	skipErrno syscall.Errno
	skip      uint8
	// want, when wantSet, is the only acceptable result (slots[wantSlot]
	// instead when wantSlot >= 0).
	want     uintptr
	wantSet  bool
	wantSlot int8
	// zero is what a CheckZero op checks.
	zero []byte
	step Step
}

// Program is everything a child does between fork and exec.
type Program struct {
	// Cloneflags are the namespaces the child is created in (0: none).
	Cloneflags uintptr
	// Init ops run in the child before it forks the command; only with
	// namespaces (the child is then the PID namespace's init).
	Init []Op
	// Cmd ops run in the command's process right before execve.
	Cmd []Op
	// ExitFD is where init reports the command's status (namespaces only).
	ExitFD int
	// Janitor ops run in init, instead of the report, when the launcher
	// died (LauncherGone arrived): every process of the namespace is dead
	// by then. Their errors are ignored; init then execs the janitor
	// command, if one is set, to remove what the launcher would have.
	Janitor []Op
	// JanitorAfterReport runs the janitor after every run, once the
	// report is written: a launcher that does not wait for init's exit
	// leaves the clean-up to it.
	JanitorAfterReport bool
	// JanitorDone lets the Janitor ops spare the exec: it is skipped when
	// they leave 0 in slot SlotJanitorDone (a removal they could do by
	// themselves, e.g. of empty directories, succeeded).
	JanitorDone bool
	// Subreaper makes the child an init without a PID namespace: a child
	// subreaper (its Init ops must set PR_SET_CHILD_SUBREAPER) that
	// reaps, never signals, and reports Pending when processes outlived
	// the command so that the launcher kills them (see Status).
	Subreaper bool
	// WantPidfd asks Start for the child's pidfd, made by the clone
	// itself (CLONE_PIDFD); TakePidfd returns it.
	WantPidfd bool

	pidfd int32 // written by the kernel in the parent (CLONE_PIDFD)
	path  *byte
	argv  []*byte
	envv  []*byte
	slots [16]uintptr

	janitorPath *byte
	janitorArgv []*byte
	janitorEnv  []*byte
	gonePath    *byte
	goneArgv    []*byte

	// The children's stacks (cloneShares only).
	stack []byte

	// Failure report, shared with the parent (MAP_SHARED): failed, step,
	// errno.
	shared []byte
	report *[3]uint32

	sigDfl    [4]uint64 // kernel sigaction: SIG_DFL, no flags, empty mask
	sigIgn    [4]uint64 // SIG_IGN
	emptyMask uint64
	initMask  uint64
	siginfo   [8 * 128]byte
	ws        int32
	cmdDone   bool
	status    Status
	rusage    syscall.Rusage

	keep []any
}

// Status is init's report on FDExit once every process of the namespace
// is gone.
type Status struct {
	// Code is the command's exit status (-1 when a signal ended it).
	Code int64
	// Signal is the signal that ended the command, or 0.
	Signal int64
	// Survivors are the processes that outlived the command (init
	// killed them).
	Survivors int64
	// UserNs, SysNs and MaxRSSKB are the whole tree's CPU time and
	// largest resident set (init reaped every process of it).
	UserNs, SysNs, MaxRSSKB int64
	// Pending, from a subreaper init, says the command is over but
	// processes outlived it: the launcher must kill init's descendants;
	// the final status follows once init reaped them all.
	Pending int64
}

// StatusSize is the size of Status on the pipe (native byte order).
const StatusSize = int(unsafe.Sizeof(Status{}))

// ParseStatus decodes what init wrote on FDExit.
func ParseStatus(b []byte) (Status, bool) {
	var s Status
	if len(b) != StatusSize {
		return s, false
	}
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&s)), StatusSize), b)
	return s, true
}

// Failure is where and why the child stopped before exec.
type Failure struct {
	Step  Step
	Errno syscall.Errno
}

func (f *Failure) Error() string { return fmt.Sprintf("step %d: %v", f.Step, f.Errno) }

// ErrAbort is reported when the child stopped without an errno (a check
// failed: the launcher went away during set-up).
var ErrAbort = errors.New("spawn: set-up check failed")

// Call prepares nr(args...).
func Call(step Step, nr uintptr, args ...uintptr) Op {
	o := Op{nr: nr, fromSlot: -1, slotArg: -1, toSlot: -1, wantSlot: -1, step: step}
	copy(o.args[:], args)
	return o
}

// nrCheckZero is no system call: the op checks that every byte of its
// zero slice is 0 (what a system call before it wrote there).
const nrCheckZero = ^uintptr(0)

// CheckZero prepares a check that b (memory the program keeps) is all
// zero when the op runs: a set that a call before it read back, such as
// the capabilities capget reports after capset emptied them. A non-zero
// byte fails the child with no errno.
func CheckZero(step Step, b []byte) Op {
	o := Call(step, nrCheckZero)
	o.zero = b
	return o
}

// OK accepts e as success.
func (o Op) OK(e syscall.Errno) Op { o.okErrno = e; return o }

// anyErrno marks an op whose failure does not matter.
const anyErrno = ^syscall.Errno(0)

// Ignore accepts every error.
func (o Op) Ignore() Op { o.okErrno = anyErrno; return o }

// SkipOn skips the next n ops when the call fails with e.
func (o Op) SkipOn(e syscall.Errno, n int) Op { o.skipErrno, o.skip = e, uint8(n); return o }

// Want fails the child unless the call returns v.
func (o Op) Want(v uintptr) Op { o.want, o.wantSet = v, true; return o }

// WantSlot fails the child unless the call returns what slot s holds.
func (o Op) WantSlot(s int) Op { o.wantSlot, o.wantSet = int8(s), true; return o }

// ToSlot stores the result in slot s.
func (o Op) ToSlot(s int) Op { o.toSlot = int8(s); return o }

// FromSlot passes slot s as argument i.
func (o Op) FromSlot(s, i int) Op { o.fromSlot, o.slotArg = int8(s), int8(i); return o }

// StoreAt writes the result at p.
func (o Op) StoreAt(p *int32) Op { o.storeAt = p; return o }

// Keep holds v for as long as the program lives: ops refer to it by
// address, which the garbage collector does not see.
func (p *Program) Keep(v any) { p.keep = append(p.keep, v) }

// Str returns a NUL-terminated copy of s kept by the program.
func (p *Program) Str(s string) uintptr {
	b, err := syscall.BytePtrFromString(s)
	if err != nil {
		// A NUL inside was refused by the plan's validation; a bad
		// pointer here would be worse than an empty path.
		b = new(byte)
	}
	p.Keep(b)
	return uintptr(unsafe.Pointer(b))
}

// Ptr keeps v and returns its address.
func (p *Program) Ptr(v unsafe.Pointer, keep any) uintptr {
	p.Keep(keep)
	return uintptr(v)
}

// SlotJanitorDone is the slot JanitorDone reads.
const SlotJanitorDone = 14

// SetJanitor sets what init execs after the launcher died.
func (p *Program) SetJanitor(path string, argv []string) error {
	var err error
	if p.janitorPath, err = syscall.BytePtrFromString(path); err != nil {
		return err
	}
	if p.janitorArgv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return err
	}
	p.janitorEnv = []*byte{nil}
	return nil
}

// SetGoneJanitor sets what init execs instead of the janitor when the
// launcher died (default: the janitor).
func (p *Program) SetGoneJanitor(path string, argv []string) error {
	var err error
	if p.gonePath, err = syscall.BytePtrFromString(path); err != nil {
		return err
	}
	p.goneArgv, err = syscall.SlicePtrFromStrings(argv)
	if p.janitorEnv == nil {
		p.janitorEnv = []*byte{nil}
	}
	return err
}

// HasJanitor says SetJanitor was called.
func (p *Program) HasJanitor() bool { return p.janitorPath != nil }

// SetExec sets what the command execs.
func (p *Program) SetExec(path string, argv, env []string) error {
	var err error
	if p.path, err = syscall.BytePtrFromString(path); err != nil {
		return err
	}
	if p.argv, err = syscall.SlicePtrFromStrings(argv); err != nil {
		return err
	}
	if p.envv, err = syscall.SlicePtrFromStrings(env); err != nil {
		return err
	}
	return nil
}

// AtFDCWD is AT_FDCWD as a system call argument.
const AtFDCWD = ^uintptr(99)

// RecvFD receives the one descriptor a child sent with SCM_RIGHTS (its
// seccomp listener); it fails once every holder of the other end closed it
// without sending.
func RecvFD(sock *os.File) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4))
	buf := make([]byte, 1)
	_, oobn, _, _, err := unix.Recvmsg(int(sock.Fd()), buf, oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return -1, err
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) != 1 {
		return -1, errors.New("no descriptor received")
	}
	fds, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(fds) != 1 {
		return -1, errors.New("no descriptor received")
	}
	return fds[0], nil
}
