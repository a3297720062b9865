package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"time"
)

// Stream is one captured output stream. When the child wrote more than the
// limit, Head holds the first part and Tail the last part; Truncated is set
// and Total counts every byte the child wrote.
type Stream struct {
	Head      []byte `json:"head"`
	Tail      []byte `json:"tail,omitempty"`
	Total     int64  `json:"total_bytes"`
	Truncated bool   `json:"truncated"`
}

// Text returns the kept bytes, with a marker between head and tail when
// bytes were dropped.
func (s Stream) Text() string {
	if !s.Truncated {
		return string(s.Head)
	}
	return string(s.Head) + "\n[... confine: output truncated ...]\n" + string(s.Tail)
}

// MarshalJSON encodes the kept bytes as strings (invalid UTF-8 becomes
// U+FFFD), which is what a reader of --json output wants:
// {"head":...,"tail":...,"total_bytes":N,"truncated":B}, tail omitted when
// empty, the strings escaped as json.Marshal escapes a string.
func (s Stream) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.Grow(len(s.Head) + len(s.Tail) + 64)
	w := bufio.NewWriterSize(&b, 4<<10)
	s.writeJSON(w)
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// UnmarshalJSON is the inverse of MarshalJSON.
func (s *Stream) UnmarshalJSON(b []byte) error {
	var v struct {
		Head       string `json:"head"`
		HeadBase64 []byte `json:"head_base64"`
		Tail       string `json:"tail"`
		TailBase64 []byte `json:"tail_base64"`
		Total      int64  `json:"total_bytes"`
		Truncated  bool   `json:"truncated"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Stream{Head: []byte(v.Head), Tail: []byte(v.Tail), Total: v.Total, Truncated: v.Truncated}
	// The exact bytes, where the strings could not hold them.
	if v.HeadBase64 != nil {
		s.Head = v.HeadBase64
	}
	if v.TailBase64 != nil {
		s.Tail = v.TailBase64
	}
	return nil
}

// Usage is the resource usage of the whole process tree, including
// descendants that were reparented after their parent died.
type Usage struct {
	UserCPU  time.Duration `json:"user_cpu_ns"`
	SysCPU   time.Duration `json:"sys_cpu_ns"`
	MaxRSSKB int64         `json:"max_rss_kb"`
	// PeakMemoryBytes is the whole tree's peak memory use: as the memory
	// cgroup recorded it, or the memory watch's highest sample (0
	// otherwise).
	PeakMemoryBytes int64 `json:"peak_memory_bytes,omitempty"`
}

// Guarantee records how one containment promise was kept for this run.
type Guarantee struct {
	Name string `json:"name"`
	// Mechanism names what enforced it ("landlock abi 7", "seccomp", ...).
	Mechanism string `json:"mechanism,omitempty"`
	// Waived is set when the profile waived the guarantee; Mechanism is
	// then empty.
	Waived bool `json:"waived,omitempty"`
}

// Denial is one operation the sandbox refused in user space (the seccomp
// notification supervisor, which also refuses every internet socket under
// network = "deny-all"), or a program that exists outside the sandbox's
// view, recorded so "why was my command denied?" has an answer. Other
// kernel-side refusals (Landlock, seccomp errno) are not seen.
type Denial struct {
	Syscall string `json:"syscall"`
	Path    string `json:"path,omitempty"`
	Errno   string `json:"errno"`
	Reason  string `json:"reason"`
	// Hint is the grant that would allow it: a flag (--ro DIR, --rw DIR)
	// or a profile line; empty when none would.
	Hint string `json:"hint,omitempty"`
}

// Hinted is a refusal of the run that a grant would have avoided: Err,
// and the Denial that names the grant (Denial.Hint).
type Hinted struct {
	Err    error
	Denial Denial
}

func (h *Hinted) Error() string {
	return h.Err.Error() + "; " + h.Denial.Reason + "; to allow it: " + h.Denial.Hint
}

func (h *Hinted) Unwrap() error { return h.Err }

// Persistence is one change a run made to a path of its work tree that a
// program outside the sandbox may execute or obey later (git hooks and
// configuration, a nested repository, a shell rc or editor task file).
// Changes to .git itself happen only where the profile waives
// no-git-persistence; the others are reported, not prevented.
type Persistence struct {
	// Path is relative to the work tree.
	Path string `json:"path"`
	// Kind is "created", "modified" or "removed".
	Kind string `json:"kind"`
	// What names the kind of path ("git hooks", "shell rc file", ...).
	What string `json:"what"`
}

// SkippedBackend is a provider that was not selected for a run, and why.
type SkippedBackend struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// JSONAPI is the revision of the machine-readable interface: the JSON
// form of CommandResult (`run --json`), the refusal object, `check --json`
// and `version --json`; every one of them carries it as "json_api", and
// schema/result.schema.json describes the result. A client (python/)
// refuses a binary older than the revision it was written for. Raise it
// when a client could depend on the change.
//
//  1. run --json prints {"error": {...}} on a refusal; event_log_skipped.
//  2. persistence in run results; confine fs and confine git (Tier 1),
//     whose refusals are the same {"error": {...}} object.
//  3. run --die-with-parent (the Python client passes it on every run).
//  4. json_api in every result, refusal and check; head_base64 and
//     tail_base64 (the exact bytes, when not UTF-8); run --result-fd.
const JSONAPI = 4

// CommandResult is the bounded, structured outcome of one run.
type CommandResult struct {
	// JSONAPI is the revision of this object's JSON form (spec.JSONAPI).
	JSONAPI int `json:"json_api"`
	// RunID identifies the run in the event log.
	RunID string `json:"run_id"`
	// ExitCode is the command's exit status, or -1 when it died of a signal.
	ExitCode int `json:"exit_code"`
	// Signal is the signal number that ended the command, or 0.
	Signal    int           `json:"signal,omitempty"`
	Stdout    Stream        `json:"stdout"`
	Stderr    Stream        `json:"stderr"`
	Duration  time.Duration `json:"duration_ns"`
	TimedOut  bool          `json:"timed_out"`
	Cancelled bool          `json:"cancelled"`
	// Killed is set when confine had to signal the tree (timeout, cancel,
	// launcher death) or when survivors were removed after the main
	// process exited.
	Killed bool `json:"killed"`
	// Survivors counts descendants still alive after the main process
	// exited; they were killed.
	Survivors int `json:"survivors,omitempty"`
	// OOMKilled says the kernel killed a process of the run for reaching
	// the run's memory bound (its memory cgroup); Signal alone would only
	// say SIGKILL.
	OOMKilled bool `json:"oom_killed,omitempty"`
	// MemoryLimitKilled says the run reached its memory bound and was
	// stopped for it: under a memory cgroup the kernel killed a process
	// (OOMKilled too); under the memory watch the launcher killed the
	// whole tree.
	MemoryLimitKilled bool `json:"memory_limit_killed,omitempty"`
	// MemoryBound names what bounded the run's memory: "memory-cgroup"
	// (the whole tree, by the kernel), "memory-watch" (the whole tree,
	// by the launcher sampling its processes' resident memory, where no
	// memory cgroup can be made) or "rlimit-data" (each process on its
	// own).
	MemoryBound string `json:"memory_bound,omitempty"`
	Usage       Usage  `json:"usage"`
	// Backend names the confinement backend (provider) that ran the
	// command: "landlock+namespaces" or "landlock+seccomp".
	Backend string `json:"backend"`
	// SkippedBackends are the providers that were not selected, in the
	// registry's order, each with the reason.
	SkippedBackends []SkippedBackend `json:"skipped_backends,omitempty"`
	// Layers are the confinement layers that were active.
	Layers     []string    `json:"layers"`
	Guarantees []Guarantee `json:"guarantees"`
	// PathOmitted lists PATH components confine left out of a derived PATH.
	PathOmitted []string `json:"path_omitted,omitempty"`
	// EventLogSkipped, when set, says why this run was not recorded in the
	// event log: the CLI's default log could not be determined or opened
	// (no HOME, a read-only home). An explicitly configured log that
	// cannot be written refuses the run instead.
	EventLogSkipped string `json:"event_log_skipped,omitempty"`
	// Caches are the warm build caches the run had (NAME=DIR): kept
	// across runs of the same user, profile and work directory.
	Caches []string `json:"caches,omitempty"`
	// HiddenCredentials lists credential files left unreadable inside
	// granted read-only roots.
	HiddenCredentials []string `json:"hidden_credentials,omitempty"`
	// Denials are the latest operations the supervisor refused (at most 256).
	Denials []Denial `json:"denials,omitempty"`
	// Persistence lists the run's changes to paths of the work tree that
	// something outside the sandbox may execute later (see Persistence).
	Persistence []Persistence `json:"persistence,omitempty"`
	// Connections are the egress proxy's records, one per connection the
	// command asked for, allowed or denied (network = "allowlist" only).
	Connections []Connection `json:"connections,omitempty"`
}
