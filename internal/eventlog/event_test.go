//go:build unix

package eventlog

import (
	"bytes"
	"encoding/json"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

func TestEnvNames(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{"nil", nil, []string{}},
		{"values dropped", []string{"SECRET=hunter2", "PATH=/usr/bin"}, []string{"PATH", "SECRET"}},
		{"value with =", []string{"A=b=c"}, []string{"A"}},
		{"empty value", []string{"EMPTY="}, []string{"EMPTY"}},
		{"bare name", []string{"NAME"}, []string{"NAME"}},
		{"duplicates", []string{"X=1", "X=2", "A=3"}, []string{"A", "X"}},
		{"empty name skipped", []string{"=value", ""}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := EnvNames(tt.env)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("EnvNames(%q) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
}

func TestRedactEnv(t *testing.T) {
	tests := []struct {
		name string
		s    string
		env  []string
		want string
	}{
		{"value hidden", `entry "SECRET=hunter2" bad`, []string{"SECRET=hunter2"}, `entry "SECRET=[redacted]" bad`},
		{"every occurrence", "hunter2 and hunter2", []string{"S=hunter2"}, "[redacted] and [redacted]"},
		{"longest first", "tok-abcdef", []string{"A=abcd", "B=tok-abcdef"}, "[redacted]"},
		{"short values kept", "LANG is C", []string{"LANG=C"}, "LANG is C"},
		{"no env", "plain", nil, "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RedactEnv(tt.s, tt.env); got != tt.want {
				t.Fatalf("RedactEnv(%q) = %q, want %q", tt.s, got, tt.want)
			}
		})
	}
}

func TestNewRunID(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{16}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewRunID()
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("bad or repeated run id %q", id)
		}
		seen[id] = true
	}
}

func fullEvent() Event {
	return Event{
		Time:            time.Date(2026, 3, 4, 5, 6, 7, 891011121, time.FixedZone("X", 3600)),
		RunID:           "0123456789abcdef",
		Scope:           "repo:example",
		CapabilityID:    "cap-42",
		Profile:         "default",
		Tier:            1,
		Backend:         "landlock",
		SkippedBackends: []SkippedBackend{{Name: "bwrap", Reason: "not installed"}},
		LandlockABI:     6,
		Layers:          []string{"landlock", "seccomp", "seccomp-notify", "rlimits", "pids-cgroup"},
		Argv:            []string{"sh", "-c", "echo \"<a&b>\"\n\x1b[31m\u2028", "bad\xffutf8"},
		Dir:             "/work",
		EnvNames:        []string{"HOME", "PATH"},
		Limits:          spec.DefaultLimits(),
		ExitCode:        -1,
		Signal:          9,
		DurationNS:      int64(1500 * time.Millisecond),
		TimedOut:        true,
		Cancelled:       true,
		Killed:          true,
		Survivors:       3,
		StdoutBytes:     1 << 21,
		StderrBytes:     12,
		StdoutTruncated: true,
		Guarantees: []spec.Guarantee{
			{Name: "no-network", Mechanism: "seccomp"},
			{Name: "no-foreign-signals", Waived: true},
		},
		Denials: 2,
		Error:   "sandbox unavailable: no-foreign-signals needs Landlock ABI 6",
	}
}

// TestLineIsJSONEncoding holds the slog attributes and the struct's JSON
// tags together: a written line is byte for byte the JSON encoding of the
// normalized Event, so every field is present, in order, under its tag.
func TestLineIsJSONEncoding(t *testing.T) {
	tests := []struct {
		name string
		e    Event
	}{
		{"zero", Event{}},
		{"full", fullEvent()},
		{"refused", Event{RunID: "r", Argv: []string{"x"}, Error: "capability refused: expired"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustNormalize(t, tt.e)
			line, err := e.line()
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			enc := json.NewEncoder(&want)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(e); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(line, want.Bytes()) {
				t.Fatalf("line\n%s\nwant the JSON encoding\n%s", line, want.Bytes())
			}
			var back Event
			if err := json.Unmarshal(line, &back); err != nil {
				t.Fatal(err)
			}
			if tt.name != "full" && !reflect.DeepEqual(back, e) {
				t.Fatalf("round trip\n%+v\nwant\n%+v", back, e)
			}
		})
	}
	// Every exported field has a snake_case tag of its own.
	typ := reflect.TypeFor[Event]()
	snake := regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	for i := range typ.NumField() {
		f := typ.Field(i)
		if tag := f.Tag.Get("json"); !snake.MatchString(tag) {
			t.Errorf("field %s has json tag %q, want a bare snake_case name", f.Name, tag)
		}
	}
}

func TestNormalize(t *testing.T) {
	before := time.Now()
	e := mustNormalize(t, Event{})
	if e.Time.Before(before.Add(-time.Second)) || e.Time.Location() != time.UTC {
		t.Errorf("zero time became %v, want now in UTC", e.Time)
	}
	if len(e.RunID) != 16 {
		t.Errorf("empty run id became %q", e.RunID)
	}
	for name, isNil := range map[string]bool{
		"skipped_backends": e.SkippedBackends == nil, "layers": e.Layers == nil,
		"argv": e.Argv == nil, "env_names": e.EnvNames == nil, "guarantees": e.Guarantees == nil,
	} {
		if isNil {
			t.Errorf("%s left nil", name)
		}
	}
	if _, err := (Event{Time: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}).normalize(); err == nil {
		t.Errorf("year 10000 accepted")
	}
	kept := mustNormalize(t, Event{RunID: "given", Time: fullEvent().Time})
	if kept.RunID != "given" || !kept.Time.Equal(fullEvent().Time) {
		t.Errorf("given run id or time replaced: %+v", kept)
	}
}

func TestSetSpecAndResult(t *testing.T) {
	var e Event
	e.SetSpec(spec.CommandSpec{
		Program:  "go",
		Args:     []string{"test", "./..."},
		Worktree: "/src",
		Env:      []string{"PATH=/usr/bin", "GOFLAGS=-mod=mod"},
		Profile:  "build",
		Limits:   spec.Limits{WallTime: time.Minute},
	})
	r := spec.CommandResult{
		ExitCode: 1, Signal: 0, Duration: 2 * time.Second, TimedOut: true, Killed: true, Survivors: 2,
		Stdout:     spec.Stream{Total: 100, Truncated: true},
		Stderr:     spec.Stream{Total: 7},
		Backend:    "landlock",
		Guarantees: []spec.Guarantee{{Name: "no-network", Mechanism: "seccomp"}},
		Denials:    []spec.Denial{{Syscall: "chmod"}, {Syscall: "connect"}},
	}
	e.SetResult(r)
	wantLimits := spec.DefaultLimits()
	wantLimits.WallTime = time.Minute
	want := Event{
		Profile: "build", Backend: "landlock",
		Argv: []string{"go", "test", "./..."}, Dir: "/src", EnvNames: []string{"GOFLAGS", "PATH"},
		Limits:   wantLimits,
		ExitCode: 1, DurationNS: int64(2 * time.Second), TimedOut: true, Killed: true, Survivors: 2,
		StdoutBytes: 100, StderrBytes: 7, StdoutTruncated: true,
		Guarantees: r.Guarantees, Denials: 2,
	}
	if !reflect.DeepEqual(e, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", e, want)
	}
	if strings.Contains(strings.Join(e.EnvNames, ""), "mod") {
		t.Fatalf("env value leaked into names: %q", e.EnvNames)
	}
	e2 := Event{Backend: "bwrap"}
	e2.SetResult(r)
	if e2.Backend != "bwrap" {
		t.Errorf("SetResult replaced the backend with %q", e2.Backend)
	}
}
