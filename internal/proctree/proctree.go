//go:build linux

// Package proctree finds and kills every descendant of a process, and runs
// the one loop that takes a run to its end (Supervise), whoever supervises
// it. A subreaper supervisor's orphans are reparented to it, so "its
// descendants" is exactly the run's process tree, however its members
// setsid() or double-fork.
package proctree

import (
	"bytes"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Descendants returns the pids of all live descendants of root. It scans
// /proc because the per-task children files need CONFIG_PROC_CHILDREN,
// which common kernels (this project's CI included) do not set.
func Descendants(root int) ([]int, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	parent := make(map[int]int, len(names))
	buf := make([]byte, 512)
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		if pp, ok := ppid(pid, buf); ok {
			parent[pid] = pp
		}
	}
	children := make(map[int][]int, len(parent))
	for pid, pp := range parent {
		children[pp] = append(children[pp], pid)
	}
	var out []int
	stack := []int{root}
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, c := range children[p] {
			out = append(out, c)
			stack = append(stack, c)
		}
	}
	return out, nil
}

// ppid reads the parent pid from /proc/PID/stat. The comm field may hold
// spaces and parentheses, so parse from the last ')'.
func ppid(pid int, buf []byte) (int, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, false
	}
	n, err := unix.Read(fd, buf)
	unix.Close(fd)
	if err != nil || n <= 0 {
		return 0, false
	}
	b := buf[:n]
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+4 >= len(b) {
		return 0, false
	}
	// ") S PPID ..."
	f := bytes.Fields(b[i+1:])
	if len(f) < 2 {
		return 0, false
	}
	pp, err := strconv.Atoi(string(f[1]))
	return pp, err == nil
}

// Signal sends sig to every descendant of root except the pids in spare
// and returns how many it signalled.
func Signal(root int, sig unix.Signal, spare ...int) int {
	ds, err := Descendants(root)
	if err != nil {
		return 0
	}
	n := 0
next:
	for _, p := range ds {
		for _, s := range spare {
			if p == s {
				continue next
			}
		}
		if unix.Kill(p, sig) == nil {
			n++
		}
	}
	return n
}
