package planner

// A run's limits, as every OS's RunCommand merges them.

import (
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// MergeLimits is the run's limits: the spec's where set, else the
// profile's, else the defaults; memory's default is the host's
// (defaultMemory, given the built-in default), not a fixed size.
func MergeLimits(prof, s spec.Limits, defaultMemory func(fallback int64) int64) spec.Limits {
	l := prof.WithDefaults()
	if prof.MemoryBytes == 0 && s.MemoryBytes == 0 {
		l.MemoryBytes = defaultMemory(l.MemoryBytes)
	}
	set := func(dst *int64, v int64) {
		if v != 0 {
			*dst = v
		}
	}
	setD := func(dst *time.Duration, v time.Duration) {
		if v != 0 {
			*dst = v
		}
	}
	setD(&l.WallTime, s.WallTime)
	setD(&l.CPUTime, s.CPUTime)
	setD(&l.KillGrace, s.KillGrace)
	set(&l.MemoryBytes, s.MemoryBytes)
	set(&l.MaxProcs, s.MaxProcs)
	set(&l.FileSizeBytes, s.FileSizeBytes)
	set(&l.OpenFiles, s.OpenFiles)
	set(&l.OutputBytes, s.OutputBytes)
	return l
}
