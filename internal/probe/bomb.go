//go:build linux

package probe

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// quietFiles returns standard descriptors for helper processes that must not
// hold the probe's output: /dev/null, or, when it is missing, pipes whose
// other ends are closed (the Go runtime of a child refuses to start with
// closed standard descriptors and no /dev/null). done closes the parent's
// copies once the processes are started.
func quietFiles() (files []*os.File, done func(), err error) {
	if null := devNull(); null != nil {
		return []*os.File{null, null, null}, func() { null.Close() }, nil
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	inW.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		return nil, nil, err
	}
	outR.Close()
	return []*os.File{inR, outW, outW}, func() { inR.Close(); outW.Close() }, nil
}

// setsid-daemon: the probe starts a child in a new session (setsid); that
// child starts the grandchild and exits at once (the double fork of a
// daemon). The grandchild writes its pid to MARKER and sleeps 300s. The probe
// reports escaped once the grandchild is alive after its parent exited; the
// harness must check that it is gone once the sandbox is over.

const daemonSleepFor = 300 * time.Second

func vSetsidDaemon(args []string) result {
	markerPath := args[0]
	exe, err := selfPath()
	if err != nil {
		return blocked("find own executable", err)
	}
	files, done, err := quietFiles()
	if err != nil {
		return blocked("open standard files for the daemon", err)
	}
	// The middle child reports a failure to start the grandchild on fd 2.
	errR, errW, err := os.Pipe()
	if err != nil {
		done()
		return blocked("pipe", err)
	}
	attr := &os.ProcAttr{Files: []*os.File{files[0], files[1], errW}, Sys: &syscall.SysProcAttr{Setsid: true}}
	p, err := os.StartProcess(exe, selfArgv(exe, hiddenDaemonMid, markerPath), attr)
	done()
	errW.Close()
	if err != nil {
		errR.Close()
		return blocked("start setsid child", err)
	}
	st, _ := p.Wait()
	msg := make([]byte, 512)
	n, _ := errR.Read(msg)
	errR.Close()
	if !st.Success() {
		return blockedf("setsid child: %s: %s", st, strings.TrimSpace(string(msg[:n])))
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(markerPath)
		if err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				if err := unix.Kill(pid, 0); err != nil {
					return blockedf("daemon pid %d wrote the marker but is gone: %s", pid, errString(err))
				}
				return escaped("daemon pid %d runs in a new session after its parent exited (marker %s); the harness must check it did not outlive the sandbox", pid, markerPath)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return blockedf("the daemon did not write %s within 10s", markerPath)
}

// daemonMid is the session leader: start the grandchild, do not wait.
func daemonMid(args []string) int {
	if len(args) != 1 {
		return exitUsage
	}
	exe, err := selfPath()
	if err != nil {
		fmt.Fprintln(os.Stderr, "find own executable:", errString(err))
		return exitBlocked
	}
	files, done, err := quietFiles()
	if err != nil {
		fmt.Fprintln(os.Stderr, "standard files:", errString(err))
		return exitBlocked
	}
	p, err := os.StartProcess(exe, selfArgv(exe, hiddenDaemonSleep, args[0]), &os.ProcAttr{Files: files})
	done()
	if err != nil {
		fmt.Fprintln(os.Stderr, "start grandchild:", errString(err))
		return exitBlocked
	}
	_ = p.Release()
	return exitEscaped
}

// daemonSleep is the daemon: write the pid, sleep.
func daemonSleep(args []string) int {
	if len(args) != 1 {
		return exitUsage
	}
	if err := os.WriteFile(args[0], []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return exitBlocked
	}
	time.Sleep(daemonSleepFor)
	return exitEscaped
}

// defaultForkBombMax is the number of processes that counts as unbounded.
const defaultForkBombMax = 100000

// vForkBomb starts copies of the probe running "sleep-forever" until MAX
// are running or process creation fails, then kills them all. Runs isolated:
// when the task limit is hit the Go runtime itself may die for want of a
// thread. MAX defaults to 100000; the unconfined control should pass a
// smaller value, since it really starts that many processes.
func vForkBomb(args []string) result {
	limit := defaultForkBombMax
	if len(args) > 0 {
		v, err := strconv.Atoi(args[0])
		if err != nil || v < 1 {
			return usage("bad MAX %q", args[0])
		}
		limit = v
	}
	exe, err := selfPath()
	if err != nil {
		return blocked("find own executable", err)
	}
	files, done, err := quietFiles()
	if err != nil {
		return blocked("open standard files", err)
	}
	defer done()
	runtime.GOMAXPROCS(1) // fewer threads of our own to compete for the limit
	attr := &os.ProcAttr{Files: files, Sys: &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}}
	var procs []*os.Process
	var stopErr error
	for len(procs) < limit {
		p, err := os.StartProcess(exe, selfArgv(exe, "sleep-forever"), attr)
		if err != nil {
			stopErr = err
			break
		}
		procs = append(procs, p)
		if len(procs)%1000 == 0 {
			progress("started %d processes", len(procs))
		}
	}
	for _, p := range procs {
		_ = p.Kill()
	}
	for _, p := range procs {
		_, _ = p.Wait()
	}
	if stopErr == nil {
		return escaped("started %d processes without hitting a limit (all killed again)", len(procs))
	}
	return blockedf("process creation failed after %d processes: %s", len(procs), errString(stopErr))
}

// vMemoryBomb maps MIB MiB of anonymous memory and touches every page. Runs
// isolated, so an OOM kill is reported as "killed by SIGKILL".
func vMemoryBomb(args []string) result {
	mib, err := strconv.Atoi(args[0])
	if err != nil || mib < 1 || mib > 1<<24 {
		return usage("bad MIB %q", args[0])
	}
	size := mib << 20
	mem, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return blocked(fmt.Sprintf("mmap %d MiB", mib), err)
	}
	defer unix.Munmap(mem)
	page := os.Getpagesize()
	for off := 0; off < size; off += page {
		mem[off] = 1
		if off%(64<<20) == 0 && off > 0 {
			progress("touched %d MiB", off>>20)
		}
	}
	return escaped("allocated and touched %d MiB", mib)
}

// vEnvDump reports the environment. With CANARY arguments it is escaped
// when any of them appears in it (name or value), blocked otherwise; without,
// it is escaped when the environment is not empty.
func vEnvDump(args []string) result {
	env := os.Environ()
	sort.Strings(env)
	all := strings.Join(env, "\n")
	if len(args) == 0 {
		if len(env) == 0 {
			return blockedf("empty environment")
		}
		return escaped("%d variables:\n%s", len(env), all)
	}
	var seen []string
	for _, c := range args {
		if c != "" && strings.Contains(all, c) {
			seen = append(seen, c)
		}
	}
	if len(seen) > 0 {
		return escaped("canaries visible: %s; %d variables:\n%s", strings.Join(seen, ","), len(env), all)
	}
	return blockedf("no canary visible; %d variables:\n%s", len(env), all)
}

// vSleepForever is a target for the other vectors. It reports only if it
// ever wakes up.
func vSleepForever([]string) result {
	time.Sleep(time.Hour)
	return escaped("slept 1h")
}
