//go:build darwin

package confine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/internal/credpath"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/planner"
	"github.com/confine-sandbox/confine/internal/seatbelt"
	"github.com/confine-sandbox/confine/internal/tmpdir"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Backends names the backends this build can run.
func Backends() []string { return []string{seatbelt.Name} }

// hostileTier refuses a tier 3 profile: it needs a microVM, and macOS
// has none.
func hostileTier() error {
	return fmt.Errorf("%w: tier 3 (hostile) needs a microVM backend; macOS has none", spec.ErrUnavailable)
}

// landlockABI is the event log's Landlock ABI: none on macOS.
func landlockABI() int { return 0 }

// launch runs s under sandbox-exec with a profile generated from s and
// its profile (internal/seatbelt), filling in res. It refuses, before
// anything runs, what it refuses on Linux, and also: a host without
// /usr/bin/sandbox-exec, a profile with a network allowlist (no egress
// proxy on macOS yet), a path it cannot canonicalise, and every
// guarantee Seatbelt cannot enforce that the profile does not waive.
func (l *Launcher) launch(ctx context.Context, c *policy.Cap, prof policy.Profile, s spec.CommandSpec, limits spec.Limits, res *spec.CommandResult) error {
	if l.Backend != "" && l.Backend != "auto" && l.Backend != seatbelt.Name {
		return fmt.Errorf("%w: backend %q does not exist on macOS (only %s)", spec.ErrUnavailable, l.Backend, seatbelt.Name)
	}
	if prof.Network != "" && prof.Network != spec.DenyAll {
		return fmt.Errorf("%w: profile %q asks for network %q; an allowlist is refused on macOS until the egress proxy runs there", spec.ErrUnavailable, prof.Name, prof.Network)
	}
	if err := seatbelt.Available(); err != nil {
		return err
	}
	canon := seatbelt.Canon{}
	lay, err := canon.Layout(seatbelt.Roots{Worktree: s.Worktree, Dir: s.Dir,
		ReadOnly: append(slices.Clone(prof.ReadExec), s.ReadOnly...), ReadWrite: append(slices.Clone(prof.Writable), s.ReadWrite...)})
	if err != nil {
		return err
	}
	ce := l.callerEnv()
	system := seatbelt.SystemReadExec()
	chk, err := planner.CheckRun(&s, prof, planner.Roots{Dir: lay.Dir, Writable: lay.Writable, System: system, Asked: lay.ReadExec[len(system):]},
		l.controlPaths(ce, -1), ce.get("PATH"))
	if err != nil {
		return err
	}
	guarded, env, omitted, prog := chk.Guarded, chk.Env, chk.Omitted, chk.Prog
	gs, err := ledger.Resolve(seatbelt.Decide(os.Geteuid() == 0, len(guarded) > 0), prof.Waives())
	if err != nil {
		return err
	}
	dir := lay.Dir
	for _, r := range chk.ReadOnly[len(system):] {
		res.HiddenCredentials = append(res.HiddenCredentials, credpath.Find(r)...)
	}
	res.PathOmitted = omitted
	if err := l.acquire(ctx); err != nil {
		return err
	}
	defer l.release()
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
	sbs := lay.Spec(scratch, append(seatbelt.Devices(), prof.Devices...))
	sbs.ReadOnly = guarded
	profile, err := seatbelt.Generate(sbs)
	if err != nil {
		return fmt.Errorf("%w: %v", spec.ErrInvalidSpec, err)
	}
	res.Backend, res.Layers, res.Guarantees = seatbelt.Name, []string{"seatbelt", "process-group"}, gs
	run := seatbelt.Run{Profile: profile, Path: prog, Argv: append([]string{s.Program}, s.Args...), Env: env, Dir: dir,
		Limits: limits, LiveStdout: l.LiveStdout, LiveStderr: l.LiveStderr, LiveLimit: l.LiveLimit}
	switch {
	case l.Stdin != nil:
		run.Stdin = l.Stdin
	case s.Stdin != nil:
		run.Stdin = strings.NewReader(string(s.Stdin))
	}
	start := time.Now()
	out, err := seatbelt.Exec(ctx, run)
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

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: the built-in default on macOS.
func defaultMemory(fallback int64) int64 { return fallback }
