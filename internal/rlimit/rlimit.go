//go:build linux

// Package rlimit turns a run's limits into setrlimit calls in the child.
package rlimit

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/spec"
)

// FromLimits maps spec limits to rlimit values. CPU time rounds up to whole
// seconds, the kernel's granularity. Memory is bounded per process by
// RLIMIT_DATA, which counts private writable mappings (heap, stacks,
// committed anonymous memory) but not address space reserved with
// PROT_NONE, so runtimes that reserve far more than they use (WebAssembly
// in V8, the JVM's heap, sanitizers' shadow) start; RLIMIT_AS would count
// those reservations.
func FromLimits(l spec.Limits) plan.Rlimits {
	cpu := uint64((l.CPUTime + time.Second - 1) / time.Second)
	return plan.Rlimits{
		CPUSeconds: cpu,
		Data:       uint64(l.MemoryBytes),
		NProc:      uint64(l.MaxProcs),
		FSize:      uint64(l.FileSizeBytes),
		NoFile:     uint64(l.OpenFiles),
	}
}

// Apply sets every limit, soft and hard, on the calling process, and
// RLIMIT_CORE to zero (a core dump of a sandboxed process can hold secrets it
// read and lands outside the run's control).
func Apply(r plan.Rlimits) error {
	for _, l := range []struct {
		name     string
		resource int
		v        uint64
	}{
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
		{"RLIMIT_CPU", unix.RLIMIT_CPU, r.CPUSeconds},
		{"RLIMIT_DATA", unix.RLIMIT_DATA, r.Data},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, r.NProc},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, r.FSize},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, r.NoFile},
	} {
		v := l.v
		if err := lower(l.resource, v); err != nil {
			return fmt.Errorf("set %s to %d: %w", l.name, v, err)
		}
	}
	return nil
}

// lower sets the limit to v, or keeps the current hard limit when it is
// already lower (an unprivileged process cannot raise it, and need not).
func lower(resource int, v uint64) error {
	var cur unix.Rlimit
	if err := unix.Getrlimit(resource, &cur); err != nil {
		return err
	}
	if cur.Max != unix.RLIM_INFINITY && cur.Max < v {
		v = cur.Max
	}
	return unix.Setrlimit(resource, &unix.Rlimit{Cur: v, Max: v})
}

// Setting is one limit as Apply would set it.
type Setting struct {
	Name     string
	Resource int
	Value    uint64
}

// Settings returns what Apply would set, in its order, for a caller that
// sets the limits in a child itself: each value is capped at this
// process's hard limit, which the child inherits and cannot raise.
func Settings(r plan.Rlimits) ([]Setting, error) {
	s := []Setting{
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 0},
		{"RLIMIT_CPU", unix.RLIMIT_CPU, r.CPUSeconds},
		{"RLIMIT_DATA", unix.RLIMIT_DATA, r.Data},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, r.NProc},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, r.FSize},
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, r.NoFile},
	}
	for i := range s {
		var cur unix.Rlimit
		if err := unix.Getrlimit(s[i].Resource, &cur); err != nil {
			return nil, fmt.Errorf("get %s: %w", s[i].Name, err)
		}
		if cur.Max != unix.RLIM_INFINITY && cur.Max < s[i].Value {
			s[i].Value = cur.Max
		}
	}
	return s, nil
}
