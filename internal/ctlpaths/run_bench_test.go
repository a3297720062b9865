//go:build linux

package ctlpaths

import (
	"os"
	"testing"
)

// BenchmarkControlPaths is a direct run's cost of finding confine's
// control surfaces: the caller's environment and the launcher's (the same
// in the CLI), the event log (docs/performance-launch.md).
func BenchmarkControlPaths(b *testing.B) {
	log := os.ExpandEnv("$HOME/.local/state/confine/events.jsonl")
	for b.Loop() {
		ForRun(os.Getenv, -1, log, nil)
	}
}
