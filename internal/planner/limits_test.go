package planner

import (
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// MergeLimits: the spec's value wins, then the profile's, then the
// defaults; the host's memory default applies only where neither sets
// memory.
func TestMergeLimits(t *testing.T) {
	def := spec.Limits{}.WithDefaults()
	host := func(fallback int64) int64 { return fallback/2 + 1 }
	for _, tc := range []struct {
		name    string
		prof, s spec.Limits
		want    spec.Limits
	}{
		{"defaults, memory the host's", spec.Limits{}, spec.Limits{},
			with(def, func(l *spec.Limits) { l.MemoryBytes = def.MemoryBytes/2 + 1 })},
		{"the profile's", spec.Limits{MaxProcs: 7, MemoryBytes: 1 << 30}, spec.Limits{},
			with(def, func(l *spec.Limits) { l.MaxProcs, l.MemoryBytes = 7, 1<<30 })},
		{"the spec's over the profile's", spec.Limits{MaxProcs: 7, WallTime: time.Minute}, spec.Limits{MaxProcs: 9, MemoryBytes: 2 << 30, OutputBytes: 5},
			with(def, func(l *spec.Limits) { l.MaxProcs, l.WallTime, l.MemoryBytes, l.OutputBytes = 9, time.Minute, 2<<30, 5 })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MergeLimits(tc.prof, tc.s, host); got != tc.want {
				t.Errorf("MergeLimits = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func with(l spec.Limits, change func(*spec.Limits)) spec.Limits { change(&l); return l }
