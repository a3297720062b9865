package confine

import "github.com/confine-sandbox/confine/internal/planner"

// ErrGuard wraps the persistence guard's refusals (with spec.ErrUnavailable):
// a work tree whose .git the guard cannot keep read-only as it is laid out.
var ErrGuard = planner.ErrGuard
