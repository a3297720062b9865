//go:build linux

package testutil

import (
	"os"
	"testing"
)

// The uid chosen for rows bounded by RLIMIT_NPROC: 1<<30 + k<<22 + pid for
// the first k whose uid is unused, so distinct pids give distinct uids.
func TestPickUID(t *testing.T) {
	const base = 1 << 30
	cases := []struct {
		name string
		pid  int
		used []int
		want int // 0: an error
	}{
		{"first candidate free", 1234, nil, base + 1234},
		{"largest pid", 1<<22 - 1, nil, base + 1<<22 - 1},
		{"first candidate in use", 1234, []int{base + 1234}, base + 1<<22 + 1234},
		{"another pid's candidate does not matter", 1234, []int{base + 1235}, base + 1234},
		{"all candidates in use", 7, func() []int {
			var u []int
			for k := 0; k < 64; k++ {
				u = append(u, base+k<<22+7)
			}
			return u
		}(), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			used := map[int]bool{}
			for _, u := range c.used {
				used[u] = true
			}
			got, err := pickUID(c.pid, used)
			if c.want == 0 {
				if err == nil {
					t.Fatalf("pickUID(%d) = %d, want an error", c.pid, got)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("pickUID(%d) = %d, %v; want %d", c.pid, got, err, c.want)
			}
		})
	}
}

// usedUIDs sees this process's own uid, and UnusedUID is not among them.
func TestUnusedUID(t *testing.T) {
	used, err := usedUIDs()
	if err != nil {
		t.Fatal(err)
	}
	if !used[os.Getuid()] {
		t.Fatalf("usedUIDs misses this process's uid %d", os.Getuid())
	}
	if u := UnusedUID(t); used[u] || u < 1<<30 {
		t.Fatalf("UnusedUID = %d: in use or below 1<<30", u)
	}
}
