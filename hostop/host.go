//go:build linux

package hostop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"time"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Backend is what the event log records as the backend of a Tier 1
// operation: the host itself, with no sandbox, since nothing is executed.
const Backend = "host"

// Host performs the Tier 1 operations under a capability, on one root:
// each operation first checks that the capability allows it
// (policy.AuthorizeHostOp; Tier 0 and Tier 2 profiles get no HostOpCap),
// then runs on confined paths, then is recorded in the event log.
type Host struct {
	cap  *policy.HostOpCap
	root *Root
	// EventLog, when set, is the JSON-lines file (internal/eventlog) each
	// operation, allowed or refused, is appended to.
	EventLog string
	// EventLogError, when set, hears about records that failed.
	EventLogError func(error)
	// TaskID and JobID, when set, are recorded with each operation (the
	// MCP server's session and request ids).
	TaskID, JobID string
}

// NewHost opens dir (absolute, normalised) as the root of the operations
// c allows.
func NewHost(c *policy.HostOpCap, dir string) (*Host, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: no capability", spec.ErrCapability)
	}
	r, err := OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	// The persistence guard follows the profile (its waiver and its
	// [guard] changes), as in Tier 2. A profile that cannot be looked
	// up leaves the defaults (and is refused at every operation, as is
	// one changed since).
	g, _ := c.Guard()
	r.SetGuard(g)
	return &Host{cap: c, root: r}, nil
}

// Root is the root the operations work beneath.
func (h *Host) Root() *Root { return h.root }

// Close releases the root.
func (h *Host) Close() error { return h.root.Close() }

// Allows reports whether the capability allows op now (the check every
// operation makes first; servers use it to offer only those operations).
func (h *Host) Allows(op policy.HostOp) bool {
	_, err := policy.AuthorizeHostOp(h.cap, op)
	return err == nil
}

// Begin authorises op; the returned function records the operation (with
// args, then more, and its outcome) when called with the operation's
// error, which it returns. Packages that add operations (hostop/git) use
// it the same way.
func (h *Host) Begin(op policy.HostOp, args ...string) (func(err error, more ...string) error, error) {
	start := time.Now()
	p, authErr := policy.AuthorizeHostOp(h.cap, op)
	record := func(err error, more ...string) error {
		if h.EventLog == "" {
			return err
		}
		e := eventlog.Event{
			RunID:        eventlog.NewRunID(),
			Scope:        h.cap.Scope(),
			CapabilityID: h.cap.ID(),
			Profile:      h.cap.Profile(),
			Tier:         int(policy.TierStructured),
			Backend:      Backend,
			Argv:         append(append([]string{string(op)}, args...), more...),
			Dir:          h.root.Path(),
			DurationNS:   time.Since(start).Nanoseconds(),
			TaskID:       h.TaskID,
			JobID:        h.JobID,
		}
		if p.Name != "" {
			e.Tier = int(p.Tier)
		}
		if err != nil {
			e.ExitCode = 1
			e.Error = err.Error()
		}
		lg, lerr := eventlog.Open(h.EventLog, eventlog.DefaultMaxBytes, eventlog.DefaultKeep)
		if lerr == nil {
			lerr = lg.Record(e)
			if cerr := lg.Close(); lerr == nil {
				lerr = cerr
			}
		}
		if lerr != nil && h.EventLogError != nil {
			h.EventLogError(fmt.Errorf("event log %s: %w", h.EventLog, lerr))
		}
		return err
	}
	if authErr != nil {
		return nil, record(authErr)
	}
	return record, nil
}

// ReadFile is Read on rel, under OpReadFile.
func (h *Host) ReadFile(rel string, limit int64) (ReadResult, error) {
	done, err := h.Begin(policy.OpReadFile, rel)
	if err != nil {
		return ReadResult{}, err
	}
	p, err := h.root.ReadPath(rel)
	if err != nil {
		return ReadResult{}, done(err)
	}
	res, err := Read(p, limit)
	return res, done(err)
}

// WriteFile is Write on rel, under OpWriteFile.
func (h *Host) WriteFile(rel string, data []byte, o WriteOptions) (WriteResult, error) {
	done, err := h.Begin(policy.OpWriteFile, rel)
	if err != nil {
		return WriteResult{}, err
	}
	p, err := h.root.WritePath(rel)
	if err != nil {
		return WriteResult{}, done(err)
	}
	res, err := Write(p, data, o)
	return res, done(err, guardNote(res.Path, res.Guard)...)
}

// ApplyPatch is Patch on the root, under OpApplyPatch.
func (h *Host) ApplyPatch(diff []byte, limit int64) (PatchResult, error) {
	done, err := h.Begin(policy.OpApplyPatch)
	if err != nil {
		return PatchResult{}, err
	}
	res, err := Patch(h.root, diff, limit)
	// The event names the files the patch changed, or the ones it named
	// when it failed.
	var paths []string
	if err == nil {
		for _, f := range res.Files {
			paths = append(paths, f.Path)
		}
		for _, f := range res.Files {
			paths = append(paths, guardNote(f.Path, f.Guard)...)
		}
	} else if fps, perr := ParsePatch(diff); perr == nil {
		for _, f := range fps {
			paths = append(paths, f.target())
		}
	}
	return res, done(err, paths...)
}

// Search is Search for the regular expression pattern (RE2 syntax, ^ and $
// matching at line boundaries) beneath rel, under OpSearch.
func (h *Host) Search(ctx context.Context, rel, pattern string, o SearchOptions) (SearchResult, error) {
	done, err := h.Begin(policy.OpSearch, pattern, rel)
	if err != nil {
		return SearchResult{}, err
	}
	// (?m): ^ and $ match at line boundaries, as in grep.
	re, err := regexp.Compile("(?m)" + pattern)
	if err != nil {
		return SearchResult{}, done(fmt.Errorf("%w: %w", ErrPattern, err))
	}
	p, err := h.root.ReadPath(rel)
	if err != nil {
		return SearchResult{}, done(err)
	}
	res, err := Search(ctx, p, re, o)
	return res, done(err)
}

// List is List on rel, under OpList.
func (h *Host) List(rel string, limit int) (ListResult, error) {
	done, err := h.Begin(policy.OpList, rel)
	if err != nil {
		return ListResult{}, err
	}
	p, err := h.root.ReadPath(rel)
	if err != nil {
		return ListResult{}, done(err)
	}
	res, err := List(p, limit)
	return res, done(err)
}

// guardNote is the event log's record of a write the persistence guard
// reports: "guard-reported:ROW:PATH".
func guardNote(path, row string) []string {
	if row == "" {
		return nil
	}
	return []string{"guard-reported:" + row + ":" + path}
}

// ErrPattern: a search pattern that does not compile.
var ErrPattern = errors.New("bad search pattern")

// errorKinds names each sentinel for machine readers (confine fs --json),
// most specific first.
var errorKinds = []struct {
	err  error
	kind string
}{
	{spec.ErrCapability, "capability"},
	{ErrAbsolute, "absolute"},
	{ErrDotDot, "dotdot"},
	{ErrInvalidPath, "invalid_path"},
	{guardset.ErrProtected, "guard"},
	{ErrSymlinkEscape, "symlink_escape"},
	{ErrSymlink, "symlink"},
	{ErrSpecial, "special_file"},
	{ErrMultiLinked, "multiply_linked"},
	{ErrTooLarge, "too_large"},
	{ErrPattern, "pattern"},
	{ErrPatch, "patch"},
	{ErrUnsupported, "unsupported"},
	{fs.ErrNotExist, "not_found"},
	{fs.ErrExist, "exists"},
	{fs.ErrPermission, "permission"},
}

// ErrorKind is a short stable name for the sentinel err wraps
// ("symlink_escape", "dotdot", "capability", ...), or "error".
func ErrorKind(err error) string {
	for _, k := range errorKinds {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return "error"
}
