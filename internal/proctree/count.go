//go:build linux

package proctree

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Tasks counts the tasks of every descendant of root, root itself
// excluded: each process counts its threads (a zombie counts once, since
// it still holds its pid until reaped), as RLIMIT_NPROC and the pids
// cgroup do.
//
// The scan is not atomic (see tree); a task created during the scan may
// be missed; callers that must not miss one account for the creations
// they let start before the scan (see package notify).
func Tasks(root int) (int, error) {
	procs, members, err := tree(root)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pid := range members {
		n += max(procs[pid].threads, 1)
	}
	return n, nil
}

// proc is one process of a /proc scan: its parent and its thread count.
type proc struct{ ppid, threads int }

// tree scans /proc for every descendant of root (root excluded) and
// returns the scan and the descendants.
//
// The scan is not atomic, and a process whose parent exits during it is
// reparented meanwhile: its recorded parent is then missing from the scan.
// Such a process is read again (its parent now is the subreaper or a
// surviving ancestor) until its parent is known, so a process that exists
// for the whole scan is always counted where it belongs.
func tree(root int) (map[int]proc, []int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, nil, err
	}
	procs := make(map[int]proc, len(names))
	buf := make([]byte, 1024)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pp, th, ok := statCounts(pid, buf); ok {
			procs[pid] = proc{pp, th}
		}
	}
	// Re-read the orphans of the scan: their parent exited after they
	// were read and they were reparented. Each round follows one more
	// exit up the ancestry; a handful suffices unless a chain of
	// ancestors keeps exiting, in which case the last answer is used.
	for round := 0; round < 8; round++ {
		again := false
		for pid, p := range procs {
			if _, known := procs[p.ppid]; known || p.ppid == 0 {
				continue
			}
			pp, th, ok := statCounts(pid, buf)
			if !ok {
				delete(procs, pid)
				continue
			}
			if pp != p.ppid {
				again = true
			}
			procs[pid] = proc{pp, th}
		}
		if !again {
			break
		}
	}
	children := make(map[int][]int, len(procs))
	for pid, p := range procs {
		children[p.ppid] = append(children[p.ppid], pid)
	}
	var members []int
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range children[p] {
			members = append(members, c)
			stack = append(stack, c)
		}
	}
	return procs, members, nil
}

// statCounts reads the parent pid and the thread count (fields 4 and 20)
// from /proc/PID/stat, parsing after the last ')' since comm may hold
// spaces and parentheses.
func statCounts(pid int, buf []byte) (ppid, threads int, ok bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, 0, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	// ") state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
	// cmajflt utime stime cutime cstime priority nice num_threads ..."
	f := bytes.Fields(b[i+1:])
	if len(f) < 18 {
		return 0, 0, false
	}
	pp, err1 := strconv.Atoi(string(f[1]))
	th, err2 := strconv.Atoi(string(f[17]))
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	return pp, th, true
}
