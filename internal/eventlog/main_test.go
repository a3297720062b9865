//go:build unix

package eventlog

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// writerEnv, when set in a test binary's environment, makes TestMain act
// as one writer process of TestConcurrentProcesses instead of running
// tests. Its value is "path|maxBytes|keep|writer|count|startUnixNano".
const writerEnv = "EVENTLOG_TEST_WRITER"

func TestMain(m *testing.M) {
	if v := os.Getenv(writerEnv); v != "" {
		if err := writerProcess(v); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// writerProcess opens the log and records count events tagged with the
// writer's number, starting at the shared start time so the processes
// contend.
func writerProcess(spec string) error {
	f := strings.Split(spec, "|")
	if len(f) != 6 {
		return fmt.Errorf("bad %s %q", writerEnv, spec)
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return fmt.Errorf("bad %s field %d: %w", writerEnv, i+1, err)
		}
		n[i] = v
	}
	maxBytes, keep, writer, count, start := n[0], int(n[1]), int(n[2]), int(n[3]), n[4]
	time.Sleep(time.Until(time.Unix(0, start)))
	l, err := Open(f[0], maxBytes, keep)
	if err != nil {
		return err
	}
	defer l.Close()
	for seq := range count {
		if err := l.Record(testEvent(writer, seq)); err != nil {
			return err
		}
	}
	return l.Close()
}
