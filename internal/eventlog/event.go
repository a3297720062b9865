//go:build unix

// Package eventlog is confine's run history: one JSON line per run, appended
// to a per-user file that concurrent confine processes share, rotated by
// size, and read back by `confine inspect`.
//
// A line is exactly the JSON encoding of an Event (written through
// log/slog's JSON handler, one top-level key per field, in field order), so
// it can be read with json.Unmarshal, filtered with jq, and found with grep:
//
//	grep '"run_id":"9f86d081884c7d65"' events.jsonl
//
// The log never holds an environment value: an Event has no field for one,
// only the variable names (see EnvNames).
package eventlog

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// Event is one run, as recorded in the log. The JSON field names are stable;
// every field is always present in a written line (empty lists as []).
type Event struct {
	// Time is when the run was recorded (UTC in the log).
	Time time.Time `json:"time"`
	// RunID is a random hex identifier for the run (see NewRunID).
	RunID string `json:"run_id"`
	// Scope is the scope the run's capability was minted for.
	Scope string `json:"scope"`
	// CapabilityID identifies the capability that authorised the run.
	CapabilityID string `json:"capability_id"`
	// Profile is the sandbox profile name.
	Profile string `json:"profile"`
	// Tier is the profile's trust tier.
	Tier int `json:"tier"`
	// Backend names the provider that ran (or would have run) the command.
	Backend string `json:"backend"`
	// SkippedBackends lists the providers not selected, with the reason.
	SkippedBackends []SkippedBackend `json:"skipped_backends"`
	// LandlockABI is the Landlock ABI version in force, 0 when none.
	LandlockABI int `json:"landlock_abi"`
	// Layers are the confinement layers that were active, e.g. "landlock",
	// "seccomp", "seccomp-notify", "rlimits", "pids-cgroup".
	Layers []string `json:"layers"`
	// Argv is the command line, argv[0] first.
	Argv []string `json:"argv"`
	// Dir is the command's working directory.
	Dir string `json:"dir"`
	// EnvNames are the names of the variables in the command's environment,
	// sorted; values are never recorded.
	EnvNames []string `json:"env_names"`
	// Limits are the limits the run was given.
	Limits spec.Limits `json:"limits"`

	// ExitCode is the command's exit status, -1 when it died of a signal.
	ExitCode int `json:"exit_code"`
	// Signal is the signal that ended the command, or 0.
	Signal int `json:"signal"`
	// DurationNS is the run's wall time in nanoseconds.
	DurationNS int64 `json:"duration_ns"`
	// TimedOut is set when the wall-time limit ended the run.
	TimedOut bool `json:"timed_out"`
	// Cancelled is set when the caller cancelled the run.
	Cancelled bool `json:"cancelled"`
	// Killed is set when confine had to signal the process tree.
	Killed bool `json:"killed"`
	// Survivors counts descendants killed after the main process exited.
	Survivors int `json:"survivors"`
	// StdoutBytes and StderrBytes count every byte the command wrote.
	StdoutBytes int64 `json:"stdout_bytes"`
	StderrBytes int64 `json:"stderr_bytes"`
	// StdoutTruncated and StderrTruncated are set when output was dropped.
	StdoutTruncated bool `json:"stdout_truncated"`
	StderrTruncated bool `json:"stderr_truncated"`
	// Guarantees lists each guarantee with its mechanism or its waiver.
	Guarantees []spec.Guarantee `json:"guarantees"`
	// Denials counts operations the notification supervisor refused.
	Denials int `json:"denials"`
	// Persistence lists the run's changes to paths a host program may
	// execute later (spec.Persistence).
	Persistence []spec.Persistence `json:"persistence"`
	// Error is the reason the run was refused or failed to launch; empty
	// when the command ran.
	Error string `json:"error"`
	// TaskID and JobID are the caller's, from the CommandSpec.
	TaskID string `json:"task_id"`
	JobID  string `json:"job_id"`
	// Connections are the egress proxy's records (network = "allowlist").
	Connections []spec.Connection `json:"connections"`
}

// SkippedBackend is a provider that was not selected, and why.
type SkippedBackend struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// NewRunID returns a fresh random run identifier: 16 lowercase hex digits.
func NewRunID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it crashes instead)
	return hex.EncodeToString(b[:])
}

// EnvNames returns the variable names of env (NAME=VALUE entries), sorted
// and without duplicates. Everything from the first '=' on is dropped, so
// no value can survive; an entry without '=' is taken to be a bare name.
func EnvNames(env []string) []string {
	names := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// minRedact is the shortest environment value RedactEnv hides: shorter
// values ("C", "1", "en") would blank unrelated text and are not secrets.
const minRedact = 4

// RedactEnv replaces every occurrence in s of the value of an env entry
// (NAME=VALUE, values of at least 4 bytes) with "[redacted]". Use it on
// text built outside confine's control, such as an error message, before
// putting it in an Event.
func RedactEnv(s string, env []string) string {
	var vals []string
	for _, kv := range env {
		if _, v, ok := strings.Cut(kv, "="); ok && len(v) >= minRedact {
			vals = append(vals, v)
		}
	}
	// Longest first, so a value that contains another is hidden whole.
	slices.SortFunc(vals, func(a, b string) int { return len(b) - len(a) })
	for _, v := range vals {
		s = strings.ReplaceAll(s, v, "[redacted]")
	}
	return s
}

// SetSpec fills the request fields from s: Argv, Dir (the worktree when
// s.Dir is empty), EnvNames (names only) and Limits (with defaults applied,
// as the run gets them) and Profile.
func (e *Event) SetSpec(s spec.CommandSpec) {
	e.Argv = append([]string{s.Program}, s.Args...)
	e.Dir = s.Dir
	if e.Dir == "" {
		e.Dir = s.Worktree
	}
	e.EnvNames = EnvNames(s.Env)
	e.Limits = s.Limits.WithDefaults()
	e.Profile = s.Profile
	e.TaskID, e.JobID = s.TaskID, s.JobID
}

// SetResult fills the result summary from r. Backend is taken from r only
// when e does not name one already.
func (e *Event) SetResult(r spec.CommandResult) {
	e.ExitCode = r.ExitCode
	e.Signal = r.Signal
	e.DurationNS = int64(r.Duration)
	e.TimedOut = r.TimedOut
	e.Cancelled = r.Cancelled
	e.Killed = r.Killed
	e.Survivors = r.Survivors
	e.StdoutBytes = r.Stdout.Total
	e.StderrBytes = r.Stderr.Total
	e.StdoutTruncated = r.Stdout.Truncated
	e.StderrTruncated = r.Stderr.Truncated
	e.Guarantees = slices.Clone(r.Guarantees)
	e.Denials = len(r.Denials)
	e.Persistence = slices.Clone(r.Persistence)
	e.Connections = slices.Clone(r.Connections)
	if e.Backend == "" {
		e.Backend = r.Backend
	}
	if len(e.SkippedBackends) == 0 {
		for _, sk := range r.SkippedBackends {
			e.SkippedBackends = append(e.SkippedBackends, SkippedBackend{Name: sk.Name, Reason: sk.Reason})
		}
	}
	if len(e.Layers) == 0 {
		e.Layers = slices.Clone(r.Layers)
	}
}

// normalize returns e as it is written: time in UTC (now when unset), a
// run ID (a fresh one when unset), and empty lists instead of nil ones so
// every line has the same shape.
func (e Event) normalize() (Event, error) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Time = e.Time.UTC().Round(0)
	if y := e.Time.Year(); y < 1 || y > 9999 {
		return e, fmt.Errorf("event time %v: year outside 1..9999", e.Time)
	}
	if e.RunID == "" {
		e.RunID = NewRunID()
	}
	e.SkippedBackends = nonNil(e.SkippedBackends)
	e.Layers = nonNil(e.Layers)
	e.Argv = nonNil(e.Argv)
	e.EnvNames = nonNil(e.EnvNames)
	e.Guarantees = nonNil(e.Guarantees)
	e.Persistence = nonNil(e.Persistence)
	e.Connections = nonNil(e.Connections)
	return e, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// attrs returns one slog attribute per field, keyed and ordered as the
// struct's JSON encoding (TestLineIsJSONEncoding holds the two together).
func (e Event) attrs() []slog.Attr {
	return []slog.Attr{
		slog.String("run_id", e.RunID),
		slog.String("scope", e.Scope),
		slog.String("capability_id", e.CapabilityID),
		slog.String("profile", e.Profile),
		slog.Int("tier", e.Tier),
		slog.String("backend", e.Backend),
		slog.Any("skipped_backends", e.SkippedBackends),
		slog.Int("landlock_abi", e.LandlockABI),
		slog.Any("layers", e.Layers),
		slog.Any("argv", e.Argv),
		slog.String("dir", e.Dir),
		slog.Any("env_names", e.EnvNames),
		slog.Any("limits", e.Limits),
		slog.Int("exit_code", e.ExitCode),
		slog.Int("signal", e.Signal),
		slog.Int64("duration_ns", e.DurationNS),
		slog.Bool("timed_out", e.TimedOut),
		slog.Bool("cancelled", e.Cancelled),
		slog.Bool("killed", e.Killed),
		slog.Int("survivors", e.Survivors),
		slog.Int64("stdout_bytes", e.StdoutBytes),
		slog.Int64("stderr_bytes", e.StderrBytes),
		slog.Bool("stdout_truncated", e.StdoutTruncated),
		slog.Bool("stderr_truncated", e.StderrTruncated),
		slog.Any("guarantees", e.Guarantees),
		slog.Int("denials", e.Denials),
		slog.Any("persistence", e.Persistence),
		slog.String("error", e.Error),
		slog.String("task_id", e.TaskID),
		slog.String("job_id", e.JobID),
		slog.Any("connections", e.Connections),
	}
}

// dropLevelAndMsg removes slog's "level" and "msg" keys, which carry
// nothing for an event record, so the line is the Event and only the Event.
func dropLevelAndMsg(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && (a.Key == slog.LevelKey || a.Key == slog.MessageKey) {
		return slog.Attr{}
	}
	return a
}

// line encodes a normalized event as one JSON line (ending in '\n') with
// slog's JSON handler: the record time becomes "time", and every field is
// a top-level attribute, so the line is flat and greppable rather than the
// event nested under one key beside slog's own level and message.
func (e Event) line() ([]byte, error) {
	var buf bytes.Buffer
	h := slog.NewJSONHandler(&buf, &slog.HandlerOptions{ReplaceAttr: dropLevelAndMsg})
	r := slog.NewRecord(e.Time, slog.LevelInfo, "", 0)
	r.AddAttrs(e.attrs()...)
	if err := h.Handle(context.Background(), r); err != nil {
		return nil, fmt.Errorf("encode event %s: %w", e.RunID, err)
	}
	b := buf.Bytes()
	if len(b) == 0 || b[len(b)-1] != '\n' || bytes.IndexByte(b[:len(b)-1], '\n') >= 0 {
		return nil, fmt.Errorf("encode event %s: handler did not produce exactly one line", e.RunID)
	}
	return b, nil
}
