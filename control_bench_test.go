//go:build linux

package confine

import (
	"os"
	"testing"
)

// BenchmarkControlPaths is a direct run's cost of finding confine's
// control surfaces: the caller's environment and the launcher's (the same
// in the CLI), the event log (docs/performance-launch.md).
func BenchmarkControlPaths(b *testing.B) {
	l := &Launcher{EventLog: os.ExpandEnv("$HOME/.local/state/confine/events.jsonl")}
	for b.Loop() {
		l.controlPaths(os.LookupEnv, -1)
	}
}
