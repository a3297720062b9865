//go:build linux

// Command benchpayload is the workload bench/run.sh runs bare, under
// confine and under bwrap. It is built static (CGO_ENABLED=0) and times
// itself, so its figures exclude the sandbox's launch cost (measured
// separately):
//
//	benchpayload syscalls N FILE [FILTER]
//	                               ns per call (thread CPU time, and wall) of getppid, stat(FILE), ioctl(pipe, FIONREAD);
//	                               FILTER installs a seccomp filter on the timing thread first: allow1 (one
//	                               RET ALLOW instruction, the cheapest filter there is) or confine (the filter
//	                               confine installs, without the notification listener)
//	benchpayload files N DIR SIZE  create+write, read, rename into a sibling directory, delete N files of SIZE bytes in DIR
//	benchpayload trapped N DIR     ns per call of the calls the persistence guard traps under the core, on
//	                               existing names in DIR (made first): rename there and back, open for
//	                               writing (+close), unlink and O_CREAT|O_EXCL open (+close) of one name,
//	                               mkdir and rmdir of one name
//	benchpayload spawn N           sh -c 'i=0; while [ $i -lt N ]; do /bin/true; ...; done'
//	benchpayload flood BYTES FILE  write BYTES to stdout, elapsed ns to FILE
//	benchpayload run PROGRAM ARGS  run PROGRAM, report its tree's wall and CPU time
//
// Each prints one JSON object on stdout (flood: into FILE).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/seccomp"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "run" {
		out, err := run(os.Args[2:])
		if err != nil {
			die(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
			die(err)
		}
		return
	}
	if len(os.Args) < 3 {
		die(fmt.Errorf("usage: benchpayload syscalls|files|spawn|flood|download|conns N [ARGS] | run PROGRAM [ARGS]"))
	}
	n, err := strconv.ParseInt(os.Args[2], 10, 64)
	if err != nil || n <= 0 {
		die(fmt.Errorf("bad count %q", os.Args[2]))
	}
	args := os.Args[3:]
	var out any
	switch os.Args[1] {
	case "syscalls":
		if len(args) != 1 && len(args) != 2 {
			die(fmt.Errorf("syscalls N FILE [allow1|confine|confine-old]"))
		}
		filter := ""
		if len(args) == 2 {
			filter = args[1]
		}
		out, err = syscalls(int(n), args[0], filter)
	case "files":
		if len(args) != 2 {
			die(fmt.Errorf("files N DIR SIZE"))
		}
		size, _ := strconv.Atoi(args[1])
		out, err = files(int(n), args[0], size)
	case "trapped":
		if len(args) != 1 {
			die(fmt.Errorf("trapped N DIR"))
		}
		out, err = trapped(int(n), args[0])
	case "spawn":
		out, err = spawn(int(n))
	case "flood":
		if len(args) != 1 {
			die(fmt.Errorf("flood BYTES FILE"))
		}
		if err := flood(n, args[0]); err != nil {
			die(err)
		}
		return
	case "download":
		if len(args) != 1 {
			die(fmt.Errorf("download BYTES URL"))
		}
		out, err = download(n, args[0])
	case "conns":
		if len(args) != 2 {
			die(fmt.Errorf("conns N PARALLEL URL"))
		}
		par, _ := strconv.Atoi(args[0])
		out, err = conns(int(n), max(par, 1), args[1])
	default:
		err = fmt.Errorf("unknown workload %q", os.Args[1])
	}
	if err != nil {
		die(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		die(err)
	}
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "benchpayload:", err)
	os.Exit(1)
}

// threadCPU is the calling thread's CPU time (user+system) in ns: unlike
// wall time it does not grow while other load has the CPU.
func threadCPU() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}

// perCall times n calls of f after n/10 warm-up calls, in thread CPU time
// and in wall time, ns per call. The caller locks the OS thread.
func perCall(n int, f func() error) (cpu, wall float64, err error) {
	for i := 0; i < n/10; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	t0, c0 := time.Now(), threadCPU()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			return 0, 0, err
		}
	}
	c1, t1 := threadCPU(), time.Now()
	return float64(c1-c0) / float64(n), float64(t1.Sub(t0).Nanoseconds()) / float64(n), nil
}

// rusageCPU is the CPU time (user+system) in ms of who (RUSAGE_SELF or
// RUSAGE_CHILDREN).
func rusageCPU(who int) float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// syscalls issues raw system calls (no Go wrapper allocation in the loop):
// getppid (no arguments: a filter can decide it without looking at any),
// newfstatat on a file, and ioctl(FIONREAD) on a pipe (an argument-filtered
// call under confine's seccomp policy).
func syscalls(n int, file, filter string) (map[string]float64, error) {
	runtime.LockOSThread()
	if filter != "" {
		if err := installFilter(filter); err != nil {
			return nil, err
		}
	}
	res := map[string]float64{}
	var err error
	if res["getppid_ns"], res["getppid_wall_ns"], err = perCall(n, func() error {
		unix.RawSyscall(unix.SYS_GETPPID, 0, 0, 0)
		return nil
	}); err != nil {
		return nil, err
	}
	p, err := unix.BytePtrFromString(file)
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	cwd := unix.AT_FDCWD
	stat := func() error {
		if sysFstatat < 0 {
			return unix.Stat(file, &st)
		}
		_, _, e := unix.RawSyscall6(uintptr(sysFstatat), uintptr(cwd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&st)), 0, 0, 0)
		if e != 0 {
			return fmt.Errorf("stat %s: %w", file, e)
		}
		return nil
	}
	if res["stat_ns"], res["stat_wall_ns"], err = perCall(n, stat); err != nil {
		return nil, err
	}
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		return nil, err
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	var avail int32
	if res["ioctl_ns"], res["ioctl_wall_ns"], err = perCall(n, func() error {
		_, _, e := unix.RawSyscall(unix.SYS_IOCTL, uintptr(fds[0]), uintptr(unix.TIOCINQ), uintptr(unsafe.Pointer(&avail)))
		if e != 0 {
			return fmt.Errorf("ioctl FIONREAD: %w", e) // TIOCINQ is FIONREAD
		}
		return nil
	}); err != nil {
		return nil, err
	}
	// openat+close of the file: openat's mode and flags are inspected by
	// confine's filter, so it is not decided from nr alone.
	if res["open_ns"], res["open_wall_ns"], err = perCall(n, func() error {
		fd, _, e := unix.RawSyscall6(unix.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(p)), unix.O_RDONLY|unix.O_CLOEXEC, 0, 0, 0)
		if e != 0 {
			return fmt.Errorf("open %s: %w", file, e)
		}
		unix.RawSyscall(unix.SYS_CLOSE, fd, 0, 0)
		return nil
	}); err != nil {
		return nil, err
	}
	res["n"] = float64(n)
	return res, nil
}

// installFilter puts a seccomp filter on the calling (locked) thread only,
// so the figures of a bare run under it show what the filter costs apart
// from everything else confine does: allow1 is one RET ALLOW instruction,
// the floor of any seccomp filter; confine is the filter confine builds for
// this arch, without a notification listener (the calls it would hand to
// the supervisor fail with ENOSYS; none is timed here).
func installFilter(which string) error {
	var prog []bpf.RawInstruction
	switch which {
	case "allow1":
		prog = []bpf.RawInstruction{{Op: unix.BPF_RET | unix.BPF_K, K: unix.SECCOMP_RET_ALLOW}}
	case "confine", "confine-old":
		arch, err := seccomp.NativeArch()
		if err != nil {
			return err
		}
		// confine-old adds the rules of Landlock ABI 1 (truncation and
		// renames), as a run there gets.
		old := which == "confine-old"
		if prog, err = seccomp.Build(plan.Seccomp{Arch: arch, NotifyMetadata: true, NotifyConnect: true,
			NotifyTruncate: old, NotifyRename: old}); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown filter %q (allow1, confine, confine-old)", which)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	_, err := seccomp.Install(prog, false)
	return err
}

// files creates and writes, reads back, renames into a sibling directory
// (as build tools move finished outputs into place), then deletes n files of
// size bytes in dir, with plain system calls.
func files(n int, dir string, size int) (map[string]float64, error) {
	moved := filepath.Join(dir, "moved")
	if err := os.MkdirAll(moved, 0o755); err != nil {
		return nil, err
	}
	names, dests := make([]string, n), make([]string, n)
	for i := range names {
		names[i] = filepath.Join(dir, "f"+strconv.Itoa(i))
		dests[i] = filepath.Join(moved, "f"+strconv.Itoa(i))
	}
	buf := make([]byte, size)
	for i := range buf {
		buf[i] = byte(i)
	}
	rbuf := make([]byte, size+1)
	cpu0 := rusageCPU(unix.RUSAGE_SELF)
	t0 := time.Now()
	for _, name := range names {
		fd, err := unix.Open(name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return nil, err
		}
		if w, err := unix.Write(fd, buf); err != nil || w != size {
			unix.Close(fd)
			return nil, fmt.Errorf("write %s: %d bytes, %v", name, w, err)
		}
		if err := unix.Close(fd); err != nil {
			return nil, err
		}
	}
	t1 := time.Now()
	for _, name := range names {
		fd, err := unix.Open(name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		r, err := unix.Read(fd, rbuf)
		unix.Close(fd)
		if err != nil || r != size {
			return nil, fmt.Errorf("read %s: %d bytes, %v", name, r, err)
		}
	}
	t2 := time.Now()
	for i, name := range names {
		if err := unix.Rename(name, dests[i]); err != nil {
			return nil, err
		}
	}
	tr := time.Now()
	for _, name := range dests {
		if err := unix.Unlink(name); err != nil {
			return nil, err
		}
	}
	t3 := time.Now()
	cpu := rusageCPU(unix.RUSAGE_SELF) - cpu0
	ms := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }
	return map[string]float64{
		"total_ms": ms(t3.Sub(t0)), "create_write_ms": ms(t1.Sub(t0)),
		"read_ms": ms(t2.Sub(t1)), "rename_ms": ms(tr.Sub(t2)), "delete_ms": ms(t3.Sub(tr)), "n": float64(n), "cpu_ms": cpu,
	}, nil
}

// trapped times, call by call, what the persistence guard sends to the
// supervisor under the core in an entry made during the run (dir): each
// timed call is one such call, on names that exist (or not) as the call
// needs, so the difference between a guarded and an unguarded run is the
// guard's added cost per trapped call. Wall time (the supervisor's time
// is not the caller's CPU time), ns per call; "trapped_ns" is the mean
// over the kinds.
func trapped(n int, dir string) (map[string]float64, error) {
	runtime.LockOSThread()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	a, b, d := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "d")
	if err := os.WriteFile(a, []byte("x"), 0o644); err != nil {
		return nil, err
	}
	res := map[string]float64{}
	var err error
	renamed := false
	if _, res["rename_ns"], err = perCall(n, func() error {
		from, to := a, b
		if renamed {
			from, to = b, a
		}
		renamed = !renamed
		return unix.Rename(from, to)
	}); err != nil {
		return nil, err
	}
	if renamed {
		if err := unix.Rename(b, a); err != nil {
			return nil, err
		}
	}
	if _, res["open_write_ns"], err = perCall(n, func() error {
		fd, err := unix.Open(a, unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}); err != nil {
		return nil, err
	}
	// unlink and create alternate on one name: each is trapped.
	exists := true
	if _, res["unlink_create_ns"], err = perCall(n, func() error {
		if exists {
			exists = false
			return unix.Unlink(a)
		}
		exists = true
		fd, err := unix.Open(a, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return err
		}
		return unix.Close(fd)
	}); err != nil {
		return nil, err
	}
	made := false
	if _, res["mkdir_rmdir_ns"], err = perCall(n, func() error {
		made = !made
		if made {
			return unix.Mkdir(d, 0o755)
		}
		return unix.Rmdir(d)
	}); err != nil {
		return nil, err
	}
	res["trapped_ns"] = (res["rename_ns"] + res["open_write_ns"] + res["unlink_create_ns"] + res["mkdir_rmdir_ns"]) / 4
	res["n"] = float64(n)
	os.RemoveAll(dir)
	return res, nil
}

// spawn times one shell that forks and execs /bin/true n times.
func spawn(n int) (map[string]float64, error) {
	script := fmt.Sprintf("i=0; while [ $i -lt %d ]; do /bin/true; i=$((i+1)); done", n)
	c := exec.Command("/bin/sh", "-c", script)
	c.Stdout, c.Stderr = os.Stdout, os.Stderr
	t0 := time.Now()
	if err := c.Run(); err != nil {
		return nil, err
	}
	wall := float64(time.Since(t0).Nanoseconds()) / 1e6
	// The shell's rusage holds the /bin/true children it reaped.
	cpu := float64((c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Nanoseconds()) / 1e6
	return map[string]float64{"total_ms": wall, "cpu_ms": cpu, "n": float64(n)}, nil
}

// run runs argv with stdio passed through and reports its wall time and the
// CPU time of it and every descendant it reaped.
func run(argv []string) (map[string]float64, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.Stdout, c.Stderr = os.Stderr, os.Stderr // stdout carries the result
	t0 := time.Now()
	if err := c.Run(); err != nil {
		return nil, err
	}
	wall := float64(time.Since(t0).Nanoseconds()) / 1e6
	cpu := float64((c.ProcessState.UserTime() + c.ProcessState.SystemTime()).Nanoseconds()) / 1e6
	return map[string]float64{"wall_ms": wall, "cpu_ms": cpu}, nil
}

// flood writes n zero bytes to stdout in 128 KiB writes and records the
// elapsed time in file (stdout is the measured stream).
func flood(n int64, file string) error {
	buf := make([]byte, 128<<10)
	t0 := time.Now()
	for left := n; left > 0; {
		b := buf
		if left < int64(len(b)) {
			b = b[:left]
		}
		w, err := unix.Write(1, b)
		if err != nil {
			return err
		}
		left -= int64(w)
	}
	ns := time.Since(t0).Nanoseconds()
	return os.WriteFile(file, []byte(strconv.FormatInt(ns, 10)+"\n"), 0o644)
}
