package policy

import (
	"fmt"
	"maps"
	"testing"
)

// TestResolutionCache: one cache serves this process's environment and
// the others; each (recipe, environment) is discovered once, and evicting
// other environments never drops this process's answers.
func TestResolutionCache(t *testing.T) {
	calls := map[string]int{}
	r := &recipe{name: "x", discover: func(h *toolHost) (toolchain, error) {
		calls[h.getenv("WHO")]++
		return toolchain{}, unavailable("x", "x not found on PATH")
	}}
	proc := &toolHost{getenv: func(string) string { return "process" }}
	env := func(i int) [32]byte { return [32]byte{1, byte(i)} }
	in := func(i int) *toolHost {
		return &toolHost{getenv: func(string) string { return fmt.Sprint("env", i) }}
	}
	steps := []struct {
		name string
		do   func()
		want map[string]int
	}{
		{"process twice", func() { r.resolve(proc); r.resolve(proc) }, map[string]int{"process": 1}},
		{"one environment twice", func() { r.resolveIn(env(0), in(0)); r.resolveIn(env(0), in(0)) }, map[string]int{"process": 0, "env0": 1}},
		{"fill and evict", func() {
			for i := range maxEnvResolutions + 1 {
				r.resolveIn(env(i), in(i))
			}
		}, map[string]int{"process": 0, "env0": 0, "env1": 1}},
		{"evicted environment again", func() { r.resolveIn(env(0), in(0)) }, map[string]int{"env0": 1}},
		{"process kept", func() { r.resolve(proc) }, map[string]int{"process": 0}},
	}
	for _, s := range steps {
		clear(calls)
		s.do()
		for who, n := range s.want {
			if calls[who] != n {
				t.Errorf("%s: %s discovered %d times, want %d (all: %v)", s.name, who, calls[who], n, calls)
			}
		}
	}
	t.Cleanup(func() {
		resolutionsMu.Lock()
		defer resolutionsMu.Unlock()
		maps.DeleteFunc(resolutions, func(k resolutionKey, _ *resolution) bool { return k.r == r })
	})
}
