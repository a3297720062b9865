//go:build linux

package rlimit

import (
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/spec"
)

func TestFromLimits(t *testing.T) {
	tests := []struct {
		in   spec.Limits
		want plan.Rlimits
	}{
		{spec.Limits{CPUTime: 1500 * time.Millisecond, MemoryBytes: 1 << 30, MaxProcs: 10, FileSizeBytes: 5, OpenFiles: 64},
			plan.Rlimits{CPUSeconds: 2, Data: 1 << 30, NProc: 10, FSize: 5, NoFile: 64}},
		{spec.Limits{CPUTime: 2 * time.Second}, plan.Rlimits{CPUSeconds: 2}},
		{spec.Limits{CPUTime: time.Nanosecond}, plan.Rlimits{CPUSeconds: 1}},
	}
	for _, tt := range tests {
		if got := FromLimits(tt.in); got != tt.want {
			t.Errorf("FromLimits(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}
