// Package spec is confine's contract: what a caller asks to run (CommandSpec)
// and what it gets back (CommandResult). It has no behaviour beyond validation
// and is shared by the library, the CLI and the launch path.
package spec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Sentinel errors. Every error returned by confine wraps one of these (or a
// context error) so callers can branch with errors.Is.
var (
	// ErrInvalidSpec: the CommandSpec is malformed (empty program, relative
	// or escaping working directory, bad environment entry, ...).
	ErrInvalidSpec = errors.New("invalid command spec")
	// ErrCapability: the capability is missing, forged, revoked, expired or
	// bound to another profile.
	ErrCapability = errors.New("capability refused")
	// ErrUnavailable: a guarantee cannot be enforced on this host; the run
	// was refused before anything was spawned.
	ErrUnavailable = errors.New("sandbox unavailable")
	// ErrLaunch: confine itself failed to set up or supervise the run.
	ErrLaunch = errors.New("launch failed")
	// ErrNotFound: the program does not exist in the sandbox's view.
	ErrNotFound = errors.New("program not found")
	// ErrNotExecutable: the program exists but cannot be executed.
	ErrNotExecutable = errors.New("program not executable")
)

// NetworkPolicy says what the command may reach on the network.
type NetworkPolicy string

// Network policies.
const (
	// DenyAll: no socket other than AF_UNIX can be created, by any
	// syscall path. It is the default.
	DenyAll NetworkPolicy = "deny-all"
	// Allowlist: the command reaches only the launcher's egress proxy,
	// which lets through the hosts the profile's allowlist names. A run
	// is refused (ErrUnavailable) where that cannot be enforced.
	Allowlist NetworkPolicy = "allowlist"
)

// Limits bound what a run may consume. Zero means "the default" (see
// defaultLimits); a negative value is invalid.
type Limits struct {
	WallTime      time.Duration `json:"wall_time"`
	CPUTime       time.Duration `json:"cpu_time"`
	MemoryBytes   int64         `json:"memory_bytes"`
	MaxProcs      int64         `json:"max_procs"`
	FileSizeBytes int64         `json:"file_size_bytes"`
	OpenFiles     int64         `json:"open_files"`
	// OutputBytes caps what is kept of each of stdout and stderr.
	OutputBytes int64 `json:"output_bytes"`
	// KillGrace is the time between SIGTERM and SIGKILL when a run is ended.
	KillGrace time.Duration `json:"kill_grace"`
}

// defaultLimits are applied field by field where a spec leaves zero.
var defaultLimits = Limits{
	WallTime:      10 * time.Minute,
	CPUTime:       10 * time.Minute,
	MemoryBytes:   8 << 30,
	MaxProcs:      1024,
	FileSizeBytes: 8 << 30,
	OpenFiles:     4096,
	OutputBytes:   1 << 20,
	KillGrace:     2 * time.Second,
}

// DefaultLimits returns a copy of the built-in limits, so that no caller can
// change them for the others.
func DefaultLimits() Limits { return defaultLimits }

// WithDefaults returns l with every zero field replaced by its default.
func (l Limits) WithDefaults() Limits {
	d := defaultLimits
	if l.WallTime == 0 {
		l.WallTime = d.WallTime
	}
	if l.CPUTime == 0 {
		l.CPUTime = d.CPUTime
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.MaxProcs == 0 {
		l.MaxProcs = d.MaxProcs
	}
	if l.FileSizeBytes == 0 {
		l.FileSizeBytes = d.FileSizeBytes
	}
	if l.OpenFiles == 0 {
		l.OpenFiles = d.OpenFiles
	}
	if l.OutputBytes == 0 {
		l.OutputBytes = d.OutputBytes
	}
	if l.KillGrace == 0 {
		l.KillGrace = d.KillGrace
	}
	return l
}

// Validate rejects negative limits.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"wall_time", int64(l.WallTime)}, {"cpu_time", int64(l.CPUTime)},
		{"memory_bytes", l.MemoryBytes}, {"max_procs", l.MaxProcs},
		{"file_size_bytes", l.FileSizeBytes}, {"open_files", l.OpenFiles},
		{"output_bytes", l.OutputBytes}, {"kill_grace", int64(l.KillGrace)},
	} {
		if f.v < 0 {
			return fmt.Errorf("%w: limit %s is negative", ErrInvalidSpec, f.name)
		}
	}
	return nil
}

// CommandSpec is one fully specified, non-shell-interpreted command.
type CommandSpec struct {
	// Program is an absolute path, or a name looked up in the PATH entry
	// of Env (never the caller's PATH).
	Program string
	// Args are argv[1:]; argv[0] is Program.
	Args []string
	// Worktree is the absolute root the command may write; Dir must lie
	// inside it.
	Worktree string
	// Dir is the working directory; empty means Worktree.
	Dir string
	// Env is the complete environment as NAME=VALUE; nothing is inherited.
	Env []string
	// ReadOnly are extra absolute roots the command may read and execute.
	ReadOnly []string
	// ReadWrite are extra absolute roots the command may write.
	ReadWrite []string
	// Profile names the sandbox profile; it must match the capability.
	Profile string
	Limits  Limits
	Network NetworkPolicy
	// Stdin is fed to the command; nil means /dev/null.
	Stdin []byte
	// TaskID and JobID name the caller's task and job; they are copied
	// into the run's audit records (connections, event log) and are
	// otherwise opaque. At most 128 printable bytes each.
	TaskID string `json:",omitempty"`
	JobID  string `json:",omitempty"`
	// Approvals are egress grant tokens (policy.EgressGrant) that let an
	// allowlist run reach a host beyond its profile; each must be signed
	// by the capability's engine, unexpired and scoped to TaskID.
	Approvals []string `json:",omitempty"`
}

// Validate checks the spec's shape; it does not touch the filesystem.
func (s *CommandSpec) Validate() error {
	if s.Program == "" {
		return fmt.Errorf("%w: empty program", ErrInvalidSpec)
	}
	if strings.IndexByte(s.Program, 0) >= 0 {
		return fmt.Errorf("%w: program contains NUL", ErrInvalidSpec)
	}
	for i, a := range s.Args {
		if strings.IndexByte(a, 0) >= 0 {
			return fmt.Errorf("%w: argument %d contains NUL", ErrInvalidSpec, i+1)
		}
	}
	if err := checkAbs("worktree", s.Worktree); err != nil {
		return err
	}
	if s.Dir != "" {
		if err := checkAbs("dir", s.Dir); err != nil {
			return err
		}
		if !Within(s.Dir, s.Worktree) {
			return fmt.Errorf("%w: dir %q is outside worktree %q", ErrInvalidSpec, s.Dir, s.Worktree)
		}
	}
	for _, p := range s.ReadOnly {
		if err := checkAbs("read-only root", p); err != nil {
			return err
		}
	}
	for _, p := range s.ReadWrite {
		if err := checkAbs("read-write root", p); err != nil {
			return err
		}
	}
	for _, kv := range s.Env {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || name == "" || strings.IndexByte(kv, 0) >= 0 {
			return fmt.Errorf("%w: environment entry %q is not NAME=VALUE", ErrInvalidSpec, kv)
		}
	}
	switch s.Network {
	case "", DenyAll, Allowlist:
	default:
		return fmt.Errorf("%w: network policy %q is not supported (want %q or %q)", ErrInvalidSpec, s.Network, DenyAll, Allowlist)
	}
	for _, id := range []struct{ name, v string }{{"task id", s.TaskID}, {"job id", s.JobID}} {
		if err := CheckAuditID(id.v); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalidSpec, id.name, err)
		}
	}
	return s.Limits.Validate()
}

func checkAbs(what, p string) error {
	if p == "" || !filepath.IsAbs(p) {
		return fmt.Errorf("%w: %s %q is not an absolute path", ErrInvalidSpec, what, p)
	}
	if filepath.Clean(p) != p {
		return fmt.Errorf("%w: %s %q is not normalised (want %q)", ErrInvalidSpec, what, p, filepath.Clean(p))
	}
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: %s contains NUL", ErrInvalidSpec, what)
	}
	return nil
}

// Within reports whether clean absolute path p is root or lies beneath it.
func Within(p, root string) bool {
	if root == "/" {
		return true
	}
	return p == root || strings.HasPrefix(p, root+"/")
}
