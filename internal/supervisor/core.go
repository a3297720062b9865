package supervisor

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/landlock"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/program"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

// startCore starts the command for the core provider from a prepared
// program (package program): a clone of the supervisor that confines
// itself with raw system calls and execs, with no stage-2 re-exec. It
// returns once the command exec'd, with the seccomp listener when the plan
// asks for one.
func startCore(p *plan.Plan) (pid, notifyFD int, exitPipe *os.File, err error) {
	var closers []*os.File
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return 0, -1, nil, err
	}
	closers = append(closers, statusR, statusW)
	sync, notify := -1, -1
	var syncW, sockParent *os.File
	if p.PidsCgroup != "" {
		var syncR *os.File
		if syncR, syncW, err = os.Pipe(); err != nil {
			return 0, -1, nil, err
		}
		closers = append(closers, syncR, syncW)
		sync = int(syncR.Fd())
	}
	if p.Seccomp.NotifyMetadata || p.Seccomp.NotifyConnect {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return 0, -1, nil, fmt.Errorf("socketpair: %w", err)
		}
		sockParent = os.NewFile(uintptr(pair[0]), "notify-parent")
		closers = append(closers, sockParent, os.NewFile(uintptr(pair[1]), "notify-child"))
		notify = pair[1]
	}
	rs, err := landlock.Prepare(landlock.Policy{
		ReadExec:  p.Landlock.ReadExec,
		ReadWrite: p.Landlock.ReadWrite,
		Devices:   p.Landlock.Devices,
		Optional:  p.Landlock.Optional,
		DenyTCP:   p.Landlock.DenyTCP,
		Scope:     p.Landlock.Scope,
	})
	if err != nil {
		return 0, -1, nil, &startError{code: 125, msg: fmt.Sprintf("landlock: %v", err)}
	}
	defer rs.Close()
	arch, err := seccomp.NativeArch()
	if err != nil {
		return 0, -1, nil, &startError{code: 125, msg: fmt.Sprintf("seccomp: %v", err)}
	}
	filter, err := seccomp.Cached(seccomp.Config{Arch: arch, NotifyMetadata: p.Seccomp.NotifyMetadata,
		NotifyConnect: p.Seccomp.NotifyConnect, AllowUnixDgram: p.Seccomp.AllowUnixDgram})
	if err != nil {
		return 0, -1, nil, &startError{code: 125, msg: fmt.Sprintf("seccomp: %v", err)}
	}
	b, err := program.Core(p, filter, privileged(), sync, rs.FD, notify)
	if err != nil {
		return 0, -1, nil, &startError{code: 125, msg: err.Error()}
	}
	prog := b.P
	// The command runs on memory of this process until it exec'd; the
	// status pipe's EOF below says it did (or gave up).
	defer prog.Close()
	pid, err = prog.Start()
	statusW.Close()
	if err != nil {
		return 0, -1, nil, fmt.Errorf("start the command: %w", err)
	}
	for _, f := range closers[2:] {
		if f != syncW && f != sockParent {
			f.Close()
		}
	}
	if p.PidsCgroup != "" {
		werr := os.WriteFile(p.PidsCgroup+"/cgroup.procs", []byte(strconv.Itoa(pid)), 0)
		if werr == nil {
			_, werr = syncW.Write([]byte{1})
		}
		if werr != nil {
			_ = unix.Kill(pid, unix.SIGKILL)
			return pid, -1, nil, &startError{code: 125, msg: fmt.Sprintf("join pids cgroup %s: %v", p.PidsCgroup, werr)}
		}
		syncW.Close()
	}
	notifyFD = -1
	if sockParent != nil {
		if fd, err := recvFD(sockParent); err == nil {
			notifyFD = fd
		}
	}
	_, _ = io.Copy(io.Discard, statusR)
	if f := prog.Failure(); f != nil {
		if notifyFD >= 0 {
			unix.Close(notifyFD)
		}
		code, msg := b.StartFailure(p.Path, f)
		return pid, -1, nil, &startError{code: code, msg: msg}
	}
	if sockParent != nil && notifyFD < 0 {
		return pid, -1, nil, fmt.Errorf("the command exec'd without handing over its seccomp listener")
	}
	return pid, notifyFD, nil, nil
}

// privileged says this process holds CAP_SETPCAP: it may lock securebits
// and empty the bounding set before the command drops to its uid.
func privileged() bool {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return false
	}
	return data[0].Effective&(1<<unix.CAP_SETPCAP) != 0
}
