//go:build linux

package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestParseGoBench(t *testing.T) {
	out := `goos: linux
goarch: amd64
pkg: github.com/confine-sandbox/confine
BenchmarkRunCommandTrue-2   	     100	  11696000 ns/op
BenchmarkExecTrue-2         	     100	    632000 ns/op
BenchmarkRunCommandTrue-2   	     100	  11000000.5 ns/op
PASS`
	m := parseGoBench(out)
	if got := m["BenchmarkRunCommandTrue"]; len(got) != 2 || got[0] != 11696000 || got[1] != 11000000.5 {
		t.Fatalf("RunCommand samples %v", got)
	}
	if got := m["BenchmarkExecTrue"]; len(got) != 1 || got[0] != 632000 {
		t.Fatalf("Exec samples %v", got)
	}
}

func TestMedianQuantile(t *testing.T) {
	if m := median([]float64{5, 1, 3}); m != 3 {
		t.Fatalf("median %v", m)
	}
	if m := median([]float64{4, 1, 3, 2}); m != 2.5 {
		t.Fatalf("even median %v", m)
	}
	if q := quantile([]float64{0, 10}, 0.25); q != 2.5 {
		t.Fatalf("quantile %v", q)
	}
}

func TestTreeScriptAndBwrapArgs(t *testing.T) {
	s := treeScript(200, "612.00042", "/w/pids", "/w/ready", "/w/started")
	for _, want := range []string{"-lt 200", "( setsid sh -c 'echo $$ >> /w/pids; exec sleep 612.00042' & )", "echo ready > /w/ready; wait", "date +%s%N > /w/started; i=0"} {
		if !strings.Contains(s, want) {
			t.Errorf("tree script lacks %q:\n%s", want, s)
		}
	}
	a := strings.Join(bwrapArgs("/tmp/x/wd"), " ")
	// The workdir bind must come after --tmpfs /tmp, or the tmpfs hides it.
	if i, j := strings.Index(a, "--tmpfs /tmp"), strings.Index(a, "--bind /tmp/x/wd /tmp/x/wd"); i < 0 || j < i {
		t.Fatalf("bwrap args order: %s", a)
	}
	if strings.Contains(a, "/etc/shadow") || strings.Contains(a, "--ro-bind-try /etc /etc") {
		t.Fatalf("bwrap grants /etc wholesale or shadow: %s", a)
	}
}

func TestFlagNoise(t *testing.T) {
	row := func(bareS, confS []float64) *Row {
		r := newRow("x", "x", "ms", 1)
		b := &bench{bwrapOK: true}
		b.fill(r, map[box][]float64{bare: bareS, confine: confS})
		return r
	}
	// Every round above the threshold: a clear NOT met, however spread.
	r := row([]float64{100, 100, 100}, []float64{118, 129, 120})
	r.Met = verdict(r.Ratio[confine] <= 1.03)
	flagNoise(r, 1.03, false)
	if r.Met != "NOT met" {
		t.Errorf("consistent rounds: %q", r.Met)
	}
	// Rounds on both sides of the threshold: inconclusive.
	r = row([]float64{100, 100, 100}, []float64{50, 60, 107})
	r.Met = verdict(r.Ratio[confine] <= 1.05)
	flagNoise(r, 1.05, false)
	if !strings.HasPrefix(r.Met, "inconclusive") || !strings.Contains(r.Met, "as measured: met") {
		t.Errorf("straddling rounds: %q", r.Met)
	}
	// At-least target, all rounds above it.
	r = row([]float64{1, 1.02, 1}, []float64{0.95, 0.95, 1.1})
	r.Met = verdict(r.Ratio[confine] >= 0.9)
	flagNoise(r, 0.9, true)
	if r.Met != "met" {
		t.Errorf("at-least, consistent: %q", r.Met)
	}
	// Rounds agree but bare alone is all over the place: inconclusive.
	r = row([]float64{100, 300, 150}, []float64{50, 120, 60})
	r.Met = verdict(r.Ratio[confine] <= 1.05)
	flagNoise(r, 1.05, false)
	if !strings.HasPrefix(r.Met, "inconclusive (bare runs") {
		t.Errorf("noisy bare: %q", r.Met)
	}
}

// TestRunPool: every job runs once, at most par at a time; failures are
// counted and the first few kept; a done context stops the pool.
func TestRunPool(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name            string
		ctx             context.Context
		par, jobs       int
		failEvery       int // every n-th call fails (0: none)
		calls, fails    int
		kept, maxActive int
	}{
		{"one worker", context.Background(), 1, 10, 0, 10, 0, 0, 1},
		{"four workers, half fail", context.Background(), 4, 20, 2, 20, 10, keepErrs, 4},
		{"more workers than jobs", context.Background(), 8, 3, 1, 3, 3, 3, 3},
		{"cancelled: nothing runs", cancelled, 4, 20, 0, 0, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			calls, active, maxActive := 0, 0, 0
			release := make(chan struct{})
			started := make(chan struct{}, tt.jobs)
			go func() {
				// Hold the first calls until as many as can run at once
				// have started, so that the concurrency is observed.
				for range min(tt.par, tt.calls) {
					<-started
				}
				close(release)
			}()
			fails, kept := runPool(tt.ctx, tt.par, tt.jobs, func() error {
				mu.Lock()
				calls++
				n := calls
				active++
				maxActive = max(maxActive, active)
				mu.Unlock()
				started <- struct{}{}
				<-release
				mu.Lock()
				active--
				mu.Unlock()
				if tt.failEvery > 0 && n%tt.failEvery == 0 {
					return fmt.Errorf("call %d", n)
				}
				return nil
			})
			if calls != tt.calls || fails != tt.fails || len(kept) != tt.kept || maxActive != tt.maxActive {
				t.Fatalf("calls %d, fails %d, kept %d, at once %d; want %d, %d, %d, %d",
					calls, fails, len(kept), maxActive, tt.calls, tt.fails, tt.kept, tt.maxActive)
			}
		})
	}
}

func TestParseStatFaults(t *testing.T) {
	tests := []struct {
		name, line string
		want       procFaults
		err        bool
	}{
		{"plain", "42 (confine) S 1 42 42 0 -1 4194560 1200 3400 5 6 10 20 0 0 20 0 8 0 100 0 0",
			procFaults{min: 1200, cmin: 3400, maj: 5, cmaj: 6}, false},
		{"name with spaces and parentheses", "7 (a) b (c) R 1 7 7 0 -1 0 11 22 33 44 0 0",
			procFaults{min: 11, cmin: 22, maj: 33, cmaj: 44}, false},
		{"cut short", "7 (x) R 1 7 7 0 -1 0 11", procFaults{}, true},
		{"no name", "7 x R 1", procFaults{}, true},
		{"not a number", "7 (x) R 1 7 7 0 -1 0 11 zz 33 44", procFaults{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatFaults(tt.line)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v, error %v", got, err, tt.want, tt.err)
			}
			if err == nil && got.sub(procFaults{}) != tt.want.min+tt.want.cmin+tt.want.maj+tt.want.cmaj {
				t.Fatalf("sub %v", got.sub(procFaults{}))
			}
		})
	}
}

func TestParsePerfFaults(t *testing.T) {
	tests := []struct {
		name, out string
		want      float64
		err       bool
	}{
		{"counted", "# started on Tue Dec  1 23:50:00 2026\n\n682,,page-faults,11613393,100.00,,\n", 682, false},
		{"with a modifier", "218,,page-faults:u,4239784,100.00,,\n", 218, false},
		{"not counted", "<not counted>,,page-faults,0,0.00,,\n", 0, true},
		{"not supported", "<not supported>,,page-faults,0,100.00,,\n", 0, true},
		{"no line", "# started\n", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePerfFaults(tt.out)
			if (err != nil) != tt.err || got != tt.want {
				t.Fatalf("got %v, %v; want %v, error %v", got, err, tt.want, tt.err)
			}
		})
	}
}

func TestRateBits(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want float64
	}{{"1gbit", 1e9}, {"200mbit", 200e6}, {"2.5Gbit", 2.5e9}, {"500kbit", 500e3}, {"1gbps", 0}, {"100", 0}, {"-1mbit", 0}, {"mbit", 0}} {
		got, err := rateBits(tt.in)
		if got != tt.want || (err == nil) != (tt.want > 0) {
			t.Errorf("rateBits(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
