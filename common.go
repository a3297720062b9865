package confine

// What every OS's RunCommand shares: limits, and resolving the program as
// the run will.

import (
	"time"

	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/spec"
)

// mergeLimits is the run's limits: the spec's where set, else the
// profile's, else the defaults; memory's default is the host's
// (defaultMemory), not a fixed size.
func mergeLimits(prof, s spec.Limits) spec.Limits {
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

// ErrGuard wraps the persistence guard's refusals (with spec.ErrUnavailable):
// a work tree whose .git the guard cannot keep read-only as it is laid out.
var ErrGuard = planner.ErrGuard
