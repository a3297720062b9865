//go:build darwin

package seatbelt

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Request is one run for Launch: the spec, its profile and limits, what
// the launcher holds of the caller (the control paths no run may reach,
// the caller's PATH) and of itself (the asked backend, the run slot,
// the live streams, stdin).
type Request struct {
	// Backend is the backend the launcher asks for: "", "auto" or Name.
	Backend string
	Profile policy.Profile
	Spec    spec.CommandSpec
	Limits  spec.Limits
	// ControlPaths are confine's own control paths (internal/ctlpaths).
	ControlPaths []ctlpaths.Path
	// PATH is the caller's, from which a spec without its own is derived.
	PATH string
	// Acquire takes a run slot once the run is admitted; Release gives
	// it back.
	Acquire func(context.Context) error
	Release func()
	// LiveStdout and LiveStderr receive output as it arrives, at most
	// LiveLimit bytes each (0: unlimited).
	LiveStdout, LiveStderr io.Writer
	LiveLimit              int64
	// Stdin, when set, is copied to the command instead of Spec.Stdin.
	Stdin io.Reader
}

// Launch runs r.Spec under sandbox-exec with a profile generated from it
// and r.Profile, filling in res: the macOS backend's launch. It refuses,
// before anything runs, what Linux refuses (planner.CheckRun), and also: a
// host without /usr/bin/sandbox-exec, a profile with a network allowlist (no egress
// proxy on macOS yet), a path it cannot canonicalise, and every
// guarantee Seatbelt cannot enforce that the profile does not waive.
func Launch(ctx context.Context, r Request, res *spec.CommandResult) error {
	prof, s, limits := r.Profile, r.Spec, r.Limits
	if r.Backend != "" && r.Backend != "auto" && r.Backend != Name {
		return fmt.Errorf("%w: backend %q does not exist on macOS (only %s)", spec.ErrUnavailable, r.Backend, Name)
	}
	if prof.Network != "" && prof.Network != spec.DenyAll {
		return fmt.Errorf("%w: profile %q asks for network %q; an allowlist is refused on macOS until the egress proxy runs there", spec.ErrUnavailable, prof.Name, prof.Network)
	}
	if err := Available(); err != nil {
		return err
	}
	canon := Canon{}
	lay, err := canon.Layout(Roots{Worktree: s.Worktree, Dir: s.Dir,
		ReadOnly: append(slices.Clone(prof.ReadExec), s.ReadOnly...), ReadWrite: append(slices.Clone(prof.Writable), s.ReadWrite...)})
	if err != nil {
		return err
	}
	system := SystemReadExec()
	chk, err := planner.CheckRun(&s, prof, planner.Roots{Dir: lay.Dir, Writable: lay.Writable, System: system, Asked: lay.ReadExec[len(system):]},
		r.ControlPaths, r.PATH)
	if err != nil {
		return err
	}
	guarded, env, omitted, prog := chk.Guarded, chk.Env, chk.Omitted, chk.Prog
	gs, err := ledger.Resolve(Decide(os.Geteuid() == 0, len(guarded) > 0), prof.Waives())
	if err != nil {
		return err
	}
	dir := lay.Dir
	for _, ro := range chk.ReadOnly[len(system):] {
		res.HiddenCredentials = append(res.HiddenCredentials, credpath.Find(ro)...)
	}
	res.PathOmitted = omitted
	if err := r.Acquire(ctx); err != nil {
		return err
	}
	defer r.Release()
	td, err := tmpdir.Create(-1, -1)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	defer td.Remove()
	if err := td.Wait(); err != nil {
		return fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	scratch, err := canon.Path(td.Root)
	if err != nil {
		return fmt.Errorf("%w: private temp dir: %v", spec.ErrLaunch, err)
	}
	if !planner.HasEnv(env, "HOME") {
		env = append(env, "HOME="+scratch+"/"+tmpdir.HomeName)
	}
	if !planner.HasEnv(env, "TMPDIR") {
		env = append(env, "TMPDIR="+scratch+"/"+tmpdir.TmpName)
	}
	sbs := lay.Spec(scratch, append(Devices(), prof.Devices...))
	sbs.ReadOnly = guarded
	profile, err := Generate(sbs)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalidSpec, err)
	}
	res.Backend, res.Layers, res.Guarantees = Name, []string{"seatbelt", "process-group"}, gs
	run := Run{Profile: profile, Path: prog, Argv: append([]string{s.Program}, s.Args...), Env: env, Dir: dir,
		Limits: limits, LiveStdout: r.LiveStdout, LiveStderr: r.LiveStderr, LiveLimit: r.LiveLimit}
	switch {
	case r.Stdin != nil:
		run.Stdin = r.Stdin
	case s.Stdin != nil:
		run.Stdin = strings.NewReader(string(s.Stdin))
	}
	start := time.Now()
	out, err := Exec(ctx, run)
	res.Duration = time.Since(start)
	res.Stdout, res.Stderr = out.Stdout, out.Stderr
	if err != nil {
		return err
	}
	res.ExitCode, res.Signal = out.ExitCode, out.Signal
	res.TimedOut, res.Cancelled, res.Killed, res.Survivors = out.TimedOut, out.Cancelled, out.Killed, out.Survivors
	res.Usage = out.Usage
	return nil
}
