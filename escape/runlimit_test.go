//go:build linux

package escape

import (
	"fmt"
	"os"
	"time"
)

// CONFINE_TEST_RUN_LIMIT raises the harness's limit on one run (a Go
// duration, at least the default): under software emulation (the kernel
// matrix's TCG guests) a cold `go build` outlasts the default 3 minutes, and
// the harness's SIGKILL would hide what confine itself reports. A limit above
// 6 minutes also raises the functional tests' --timeout (workTimeout).
func init() {
	v := os.Getenv("CONFINE_TEST_RUN_LIMIT")
	if v == "" {
		return
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < runLimit {
		panic(fmt.Sprintf("CONFINE_TEST_RUN_LIMIT=%q: want a Go duration of at least %v (%v)", v, runLimit, err))
	}
	runLimit = d
}

// workTimeout is the --timeout of the functional tests' real work: 5
// minutes, or a minute below a raised run limit, so that confine's own
// timeout (which says so) ends a run that is too slow, not the harness.
func workTimeout() time.Duration {
	if d := runLimit - time.Minute; d > 5*time.Minute {
		return d
	}
	return 5 * time.Minute
}
