//go:build linux

package probe

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Memory attacks beyond one process's private memory: a bound that holds
// only per process (RLIMIT_DATA) lets a run use N times it across N
// processes, and does not count shared mappings at all; a whole-tree bound
// (the run's memory cgroup) must stop both.

// hiddenHold is the re-executed holder of vMemoryBombTree: it maps MIB MiB
// (private, or shared with "shared"), touches every page, says so with one
// byte on stdout and holds the memory until its stdin reaches EOF.
const hiddenHold = "__hold"

// vMemoryBombTree starts N processes that each hold MIB MiB at the same
// time. Escaped when all of them hold their share at once (N x MIB MiB);
// blocked when one cannot: its allocation is refused or the kernel kills
// it. Runs isolated, so the OOM kill of the attempting process itself is
// still reported.
func vMemoryBombTree(args []string) result {
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 || n > 4096 {
		return usage("bad N %q", args[0])
	}
	mib, err := strconv.Atoi(args[1])
	if err != nil || mib < 1 || mib > 1<<20 {
		return usage("bad MIB %q", args[1])
	}
	exe, err := selfPath()
	if err != nil {
		return blocked("find own executable", err)
	}
	// One pipe tells the holders to let go (EOF when this process closes
	// or dies), one collects their "holding" bytes.
	holdR, holdW, err := os.Pipe()
	if err != nil {
		return blocked("pipe", err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return blocked("pipe", err)
	}
	null := devNull()
	errOut := os.Stderr
	if null != nil {
		errOut = null
		defer null.Close()
	}
	type exit struct {
		i  int
		st *os.ProcessState
	}
	exits := make(chan exit, n)
	var procs []*os.Process
	defer func() {
		holdW.Close() // every holder exits on EOF
		for _, p := range procs {
			_, _ = p.Wait()
		}
	}()
	for i := 0; i < n; i++ {
		p, err := os.StartProcess(exe, selfArgv(exe, hiddenHold, strconv.Itoa(mib)), &os.ProcAttr{Files: []*os.File{holdR, readyW, errOut}})
		if err != nil {
			for _, q := range procs {
				_ = q.Kill()
			}
			return blocked(fmt.Sprintf("start holder %d of %d", i+1, n), err)
		}
		procs = append(procs, p)
		go func(i int, p *os.Process) {
			st, _ := p.Wait()
			exits <- exit{i, st}
		}(i, p)
	}
	procs = nil // waited by the goroutines above
	holdR.Close()
	readyW.Close()
	got := make(chan int, 1)
	go func() {
		b := make([]byte, n)
		k, _ := io.ReadFull(readyR, b)
		got <- k
	}()
	select {
	case k := <-got:
		if k == n {
			return escapedHolding(args, 2, "%d processes held %d MiB each at once (%d MiB)", n, mib, n*mib)
		}
		return blockedf("only %d of %d holders got their %d MiB", k, n, mib)
	case e := <-exits:
		return blockedf("holder %d of %d ended before holding %d MiB: %v", e.i+1, n, mib, e.st)
	}
}

// holdOn is the optional last argument of the memory bombs that a
// sampling bound must stop (the memory watch): with it, a bomb that got
// its memory keeps holding it, until the run is ended, instead of
// reporting at once and letting go. A sampling bound then sees it however
// loaded the host; without it, a run whose samples all fell before the
// bomb filled up or after it let go escaped by timing (issue 24).
const holdOn = "hold"

// escapedHolding reports escaped, first holding what the bomb got for as
// long as the run lasts (an hour at most) when asked to.
func escapedHolding(args []string, i int, format string, a ...any) result {
	if len(args) > i && args[i] == holdOn {
		time.Sleep(time.Hour)
	}
	return escaped(format, a...)
}

// hold is hiddenHold.
func hold(args []string) int {
	if len(args) < 1 {
		return exitUsage
	}
	mib, err := strconv.Atoi(args[0])
	if err != nil || mib < 1 {
		return exitUsage
	}
	flags := unix.MAP_PRIVATE | unix.MAP_ANONYMOUS
	if len(args) > 1 && args[1] == "shared" {
		flags = unix.MAP_SHARED | unix.MAP_ANONYMOUS
	}
	mem, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, flags)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mmap:", errString(err))
		return exitBlocked
	}
	for off := 0; off < len(mem); off += os.Getpagesize() {
		mem[off] = 1
	}
	if _, err := os.Stdout.Write([]byte{1}); err != nil {
		return exitBlocked
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return exitEscaped
}

// vMemoryBombShared maps MIB MiB of shared anonymous memory and touches
// every page: memory RLIMIT_DATA does not count (it counts only private
// writable mappings). Runs isolated.
func vMemoryBombShared(args []string) result {
	mib, err := strconv.Atoi(args[0])
	if err != nil || mib < 1 || mib > 1<<24 {
		return usage("bad MIB %q", args[0])
	}
	mem, err := unix.Mmap(-1, 0, mib<<20, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return blocked(fmt.Sprintf("mmap %d MiB shared", mib), err)
	}
	defer unix.Munmap(mem)
	for off := 0; off < len(mem); off += os.Getpagesize() {
		mem[off] = 1
	}
	return escapedHolding(args, 1, "allocated and touched %d MiB of shared memory", mib)
}

// vMemoryBombMemfd writes MIB MiB into a memfd with write(), 1 MiB at a
// time, and never maps it: memory in no process's RSS, which RLIMIT_DATA
// does not count either (a file on a tmpfs held open is the same). Runs
// isolated.
func vMemoryBombMemfd(args []string) result {
	mib, err := strconv.Atoi(args[0])
	if err != nil || mib < 1 || mib > 1<<24 {
		return usage("bad MIB %q", args[0])
	}
	fd, err := unix.MemfdCreate("confine-probe", unix.MFD_CLOEXEC)
	if err != nil {
		return blocked("memfd_create", err)
	}
	defer unix.Close(fd)
	chunk := make([]byte, 1<<20)
	for i := range chunk {
		chunk[i] = 1
	}
	for i := 0; i < mib; i++ {
		if _, err := unix.Write(fd, chunk); err != nil {
			return blocked(fmt.Sprintf("write MiB %d of %d into a memfd", i+1, mib), err)
		}
	}
	return escapedHolding(args, 1, "held %d MiB in a memfd no process maps", mib)
}

// vReserve is what the JVM, V8's WebAssembly memories and sanitizers do:
// reserve GIB GiB of address space with PROT_NONE, then commit and touch
// COMMIT MiB of it. A per-process memory bound must let this start (it is
// not a vector: escaped means "it worked").
func vReserve(args []string) result {
	gib, err := strconv.Atoi(args[0])
	if err != nil || gib < 1 || gib > 1<<16 {
		return usage("bad GIB %q", args[0])
	}
	commit, err := strconv.Atoi(args[1])
	if err != nil || commit < 1 || commit > gib<<10 {
		return usage("bad COMMIT %q", args[1])
	}
	mem, err := unix.Mmap(-1, 0, gib<<30, unix.PROT_NONE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
	if err != nil {
		return blocked(fmt.Sprintf("reserve %d GiB with PROT_NONE", gib), err)
	}
	defer unix.Munmap(mem)
	part := mem[:commit<<20]
	if err := unix.Mprotect(part, unix.PROT_READ|unix.PROT_WRITE); err != nil {
		return blocked(fmt.Sprintf("commit %d MiB of the reservation", commit), err)
	}
	for off := 0; off < len(part); off += os.Getpagesize() {
		part[off] = 1
	}
	return escaped("reserved %d GiB, committed and touched %d MiB", gib, commit)
}
