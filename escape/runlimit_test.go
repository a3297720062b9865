package escape

import (
	"fmt"
	"os"
	"time"
)

// CONFINE_TEST_RUN_LIMIT raises the harness's limit on one run (a Go
// duration, at least the default): under software emulation (the kernel
// matrix's TCG guests) a cold `go build` outlasts the default 3 minutes, and
// the harness's SIGKILL would hide what confine itself reports.
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
