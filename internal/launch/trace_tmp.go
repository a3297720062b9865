package launch

import (
	"fmt"
	"os"
	"time"
)

var trOn = os.Getenv("CONFINE_TRACE") == "1"
var trT0 time.Time

func Tr(what string) { tr(what) }

func tr(what string) {
	if !trOn {
		return
	}
	if what == "start" {
		trT0 = time.Now()
	}
	fmt.Fprintf(os.Stderr, "%8.3fms %s\n", float64(time.Since(trT0).Microseconds())/1000, what)
}
