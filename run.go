//go:build linux || darwin

package confine

// The run flow every OS with a backend shares: admission, the event log,
// the run slot and the end of the result. Only the launch step (backend
// selection, plan, execution) is the OS's own. Windows has no backend and
// refuses before any of this (run_other.go); the event log is unix-only.

import (
	"context"
	"errors"
	"fmt"

	"github.com/confine-sandbox/confine/internal/denials"
	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// RunCommand is the package-level RunCommand with this launcher's
// settings. Beyond the refusals every OS shares (the capability, the
// tier, the spec), the OS's backend refuses what it cannot enforce; see
// linuxrun.Launch (Linux) and seatbelt.Launch (macOS).
func (l *Launcher) RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (res spec.CommandResult, err error) {
	res.RunID = eventlog.NewRunID()
	res.JSONAPI = spec.JSONAPI
	var prof policy.Profile
	var limits spec.Limits
	if l.EventLog != "" {
		defer func() { l.record(c, prof, limits, s, res, err) }()
	}
	prof, err = admit(c, s)
	// Once per run: the event log records the same.
	limits = planner.MergeLimits(prof.Limits, s.Limits, defaultMemory)
	if err != nil {
		return res, err
	}
	err = l.launch(ctx, c, prof, s, limits, &res)
	// What was refused, with the grant that would allow it.
	var h *spec.Hinted
	if errors.As(err, &h) {
		res.Denials = append(res.Denials, h.Denial)
	}
	denials.Hint(res.Denials)
	if err != nil {
		return res, err
	}
	if res.Cancelled && ctx.Err() != nil {
		return res, fmt.Errorf("run cancelled: %w", ctx.Err())
	}
	return res, nil
}

// admit returns the profile c grants for s, after the checks that need
// no host: the capability, the tier and the spec itself.
func admit(c *policy.Cap, s spec.CommandSpec) (policy.Profile, error) {
	prof, err := policy.Authorize(c, s.Profile)
	if err != nil {
		return prof, err
	}
	if prof.Tier == policy.TierHostile {
		err = hostileTier()
	} else {
		err = policy.CheckTier(prof.Tier)
	}
	if err != nil {
		return prof, err
	}
	return prof, s.Validate()
}

// acquire takes a run slot when the launcher has a cap; release gives it
// back.
func (l *Launcher) acquire(ctx context.Context) error {
	if l.sem == nil {
		return nil
	}
	select {
	case l.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for a run slot: %w", ctx.Err())
	}
}

func (l *Launcher) release() {
	if l.sem != nil {
		<-l.sem
	}
}

// record appends the run, or its refusal, to the event log. A log that
// cannot be written does not change the run's outcome; it goes to
// EventLogError. limits are the run's (planner.MergeLimits), once admitted.
func (l *Launcher) record(c *policy.Cap, prof policy.Profile, limits spec.Limits, s spec.CommandSpec, res spec.CommandResult, runErr error) {
	e := eventlog.Event{RunID: res.RunID, Backend: res.Backend, Layers: res.Layers}
	if c != nil {
		e.CapabilityID, e.Scope = c.ID(), c.Scope()
	}
	e.SetSpec(s)
	e.SetResult(res)
	if prof.Name != "" {
		e.Profile, e.Tier = prof.Name, int(prof.Tier)
		// The limits the run had: the profile's, and the host's default
		// memory bound, which SetSpec cannot know.
		e.Limits = limits
	} else if c != nil {
		e.Profile = c.Profile()
	}
	e.LandlockABI = landlockABI()
	if runErr != nil {
		e.Error = eventlog.RedactEnv(runErr.Error(), s.Env)
	}
	lg, err := eventlog.Open(l.EventLog, eventlog.DefaultMaxBytes, eventlog.DefaultKeep)
	if err == nil {
		err = lg.Record(e)
		lg.Close()
	}
	if err != nil && l.EventLogError != nil {
		l.EventLogError(fmt.Errorf("event log %s: %w", l.EventLog, err))
	}
}
