//go:build linux

// Package selftest proves the sandbox on the user's own host: it runs the
// escape probes (internal/probe, carried in the confine binary as
// `confine __probe`) through the real launch path, `confine run`, each
// after its unconfined control, and reports per guarantee which mechanism
// enforced it and which attacks were blocked, escaped or not applicable.
//
// A vector whose control does not escape is not applicable here (the
// control's reason is reported), never "blocked". A confined run counts as
// escaped when the probe reports success or when the attack's side effect
// (a byte on a listener of the selftest, a changed file, a dead victim, a
// surviving daemon) is there, whatever the probe said.
package selftest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/spec"
)

// ProbeCommand is the hidden subcommand that makes the confine binary run
// the probe: `confine __probe VECTOR ARGS...`.
const ProbeCommand = "__probe"

// Verdicts of one vector.
const (
	Blocked       = "blocked"
	Escaped       = "escaped"
	NotApplicable = "n/a"
	// Error: the selftest could not set the vector up or the confined run
	// produced nothing to judge (a refusal where a report was needed).
	Error = "error"
)

// Options configure a selftest.
type Options struct {
	// Confine is the confine binary that runs `confine run` and carries
	// the probe.
	Confine string
	// Backend is the --backend of every confined run ("" or "auto": the
	// default selection).
	Backend string
	// Profile is the --profile of every confined run ("": the default).
	Profile string
	// Dir is where the scratch directory is made ("": os.TempDir()).
	Dir string
	// Only limits the run to these case or guarantee names (empty: all).
	Only []string
	// Progress, when set, gets one line per finished vector.
	Progress io.Writer
}

// VectorResult is one attack's outcome.
type VectorResult struct {
	Guarantee string `json:"guarantee"`
	// Mechanism is what the confined run's result says enforced the
	// guarantee on this host ("" when the run produced no result).
	Mechanism string `json:"mechanism"`
	Vector    string `json:"vector"`
	Probe     string `json:"probe_vector"`
	// Control is the unconfined attempt: "escaped: ..." or why not.
	Control string `json:"control"`
	// Confined is the attempt under confine run ("" when not run).
	Confined string `json:"confined,omitempty"`
	// Backend is the backend the confined run reports.
	Backend string `json:"backend,omitempty"`
	Verdict string `json:"verdict"`
}

// GuaranteeResult sums up the vectors of one guarantee.
type GuaranteeResult struct {
	Name      string   `json:"name"`
	Mechanism string   `json:"mechanism"`
	Vectors   []string `json:"vectors"`
	Blocked   int      `json:"blocked"`
	Escaped   int      `json:"escaped"`
	NA        int      `json:"not_applicable"`
	Errors    int      `json:"errors"`
	// Verdict: escaped, error, blocked, or n/a when no vector applied.
	Verdict string `json:"verdict"`
}

// Report is the whole selftest.
type Report struct {
	UID        int               `json:"uid"`
	Backend    string            `json:"backend_requested"`
	Profile    string            `json:"profile,omitempty"`
	Backends   []string          `json:"backends"`
	Layers     []string          `json:"layers"`
	Guarantees []GuaranteeResult `json:"guarantees"`
	Vectors    []VectorResult    `json:"vectors"`
	Blocked    int               `json:"blocked"`
	Escaped    int               `json:"escaped"`
	NA         int               `json:"not_applicable"`
	Errors     int               `json:"errors"`
	// OK: nothing escaped and nothing failed to run.
	OK bool `json:"ok"`
}

// Select returns the cases named in only (case or guarantee names), or all
// of them; an unknown name is an error.
func Select(cases []Case, only []string) ([]Case, error) {
	if len(only) == 0 {
		return cases, nil
	}
	want := map[string]bool{}
	for _, n := range only {
		known := false
		for _, c := range cases {
			known = known || c.Name == n || c.Guarantee == n
		}
		if !known {
			return nil, fmt.Errorf("no selftest vector or guarantee named %q", n)
		}
		want[n] = true
	}
	var out []Case
	for _, c := range cases {
		if want[c.Name] || want[c.Guarantee] {
			out = append(out, c)
		}
	}
	return out, nil
}

// Run runs cases and returns the report. An error means the selftest
// itself could not start (no scratch directory, the probe cannot run).
func Run(o Options, cases []Case) (*Report, error) {
	if o.Confine == "" {
		return nil, errors.New("selftest: no confine binary")
	}
	base, err := os.MkdirTemp(o.Dir, "confine-selftest-")
	if err != nil {
		return nil, fmt.Errorf("selftest: scratch directory: %w", err)
	}
	defer os.RemoveAll(base)
	if err := os.Chmod(base, 0o755); err != nil {
		return nil, fmt.Errorf("selftest: scratch directory: %w", err)
	}
	// The probe runs from a copy in a directory of its own, granted
	// read-only to every confined run: the binary may lie outside every
	// root, and granting its own directory could grant more.
	bin := filepath.Join(base, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return nil, fmt.Errorf("selftest: %w", err)
	}
	probe := filepath.Join(bin, "confine")
	if err := fixture.CopyExecutable(o.Confine, probe); err != nil {
		return nil, fmt.Errorf("selftest: copy %s for the probe: %w", o.Confine, err)
	}
	r := &runner{opts: o, base: base, bin: bin, probe: probe}
	if err := r.sanity(); err != nil {
		return nil, err
	}
	rep := &Report{UID: os.Geteuid(), Backend: o.Backend, Profile: o.Profile}
	if rep.Backend == "" {
		rep.Backend = "auto"
	}
	for _, c := range cases {
		vr := r.one(c)
		rep.Vectors = append(rep.Vectors, vr)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "confine selftest: %-34s %s\n", c.Name, vr.Verdict)
		}
	}
	rep.Layers = r.layers
	rep.Backends = r.backends
	rep.summarise()
	return rep, nil
}

func (rep *Report) summarise() {
	byName := map[string]*GuaranteeResult{}
	var order []string
	for _, g := range ledger.Names() {
		byName[g] = &GuaranteeResult{Name: g}
		order = append(order, g)
	}
	for _, v := range rep.Vectors {
		g := byName[v.Guarantee]
		if g == nil {
			g = &GuaranteeResult{Name: v.Guarantee}
			byName[v.Guarantee] = g
			order = append(order, v.Guarantee)
		}
		g.Vectors = append(g.Vectors, v.Vector)
		if v.Mechanism != "" && !strings.Contains(g.Mechanism, v.Mechanism) {
			if g.Mechanism != "" {
				g.Mechanism += " | "
			}
			g.Mechanism += v.Mechanism
		}
		switch v.Verdict {
		case Blocked:
			g.Blocked++
			rep.Blocked++
		case Escaped:
			g.Escaped++
			rep.Escaped++
		case NotApplicable:
			g.NA++
			rep.NA++
		default:
			g.Errors++
			rep.Errors++
		}
	}
	for _, n := range order {
		g := byName[n]
		if len(g.Vectors) == 0 {
			continue // not selected
		}
		switch {
		case g.Escaped > 0:
			g.Verdict = Escaped
		case g.Errors > 0:
			g.Verdict = Error
		case g.Blocked > 0:
			g.Verdict = Blocked
		default:
			g.Verdict = NotApplicable
		}
		rep.Guarantees = append(rep.Guarantees, *g)
	}
	rep.OK = rep.Escaped == 0 && rep.Errors == 0
}

type runner struct {
	opts             Options
	base, bin, probe string
	mu               sync.Mutex
	layers, backends []string
}

// sanity runs the probe once with no vector: it must answer with its
// usage report, or nothing the selftest runs can mean anything (a noexec
// scratch directory, for one).
func (r *runner) sanity() error {
	cmd := exec.Command(r.probe, ProbeCommand)
	cmd.Dir = r.base
	o := execute(cmd)
	if o.err != nil || !o.hasReport || o.report.Outcome != "error" {
		return fmt.Errorf("selftest: the probe %s does not run here (%s); is %s mounted noexec? choose another --dir", r.probe, o.brief(), r.base)
	}
	// The same under confine run: a backend that cannot run here (or a
	// host confine refuses) is a setup failure, not a row of errors.
	e, err := newEnv(r.base, r.probe, true)
	if err != nil {
		return fmt.Errorf("selftest: %w", err)
	}
	defer e.cleanup()
	co := r.confinedArgv(e, &Fixture{}, nil)
	if co.err != nil || co.refused || !co.hasReport || co.report.Outcome != "error" {
		return fmt.Errorf("selftest: the probe does not run under confine run --backend %s (%s)", orNone(r.opts.Backend), co.brief())
	}
	r.note(co.result)
	return nil
}

// one runs a case: the control, then (when the control escaped) the
// confined attempt.
func (r *runner) one(c Case) VectorResult {
	vr := VectorResult{Guarantee: c.Guarantee, Vector: c.Name, Probe: c.Vector}

	ce, err := newEnv(r.base, r.probe, false)
	if err != nil {
		vr.Verdict, vr.Control = Error, err.Error()
		return vr
	}
	defer ce.cleanup()
	cf, err := c.Setup(ce)
	if na := (errNA{}); errors.As(err, &na) {
		vr.Verdict, vr.Control = NotApplicable, "not applicable: "+na.reason
		return vr
	} else if err != nil {
		vr.Verdict, vr.Control = Error, "setup: "+err.Error()
		return vr
	}
	co := r.control(ce, c.Vector, &cf)
	escaped, why := false, co.brief()
	if co.err == nil && co.code == 0 {
		escaped = true
		if cf.Effect != nil {
			ok, d := cf.Effect()
			if !ok {
				vr.Verdict = Error
				vr.Control = fmt.Sprintf("reported escaped (%s) but the selftest saw no effect (%s): fixture bug", why, d)
				return vr
			}
			why += "; seen: " + d
		}
	}
	if !escaped {
		vr.Verdict, vr.Control = NotApplicable, "did not escape, so not applicable here: "+why
		return vr
	}
	vr.Control = "escaped: " + why
	ce.cleanup()

	fe, err := newEnv(r.base, r.probe, true)
	if err != nil {
		vr.Verdict, vr.Confined = Error, err.Error()
		return vr
	}
	defer fe.cleanup()
	ff, err := c.Setup(fe)
	if err != nil {
		vr.Verdict, vr.Confined = Error, "setup: "+err.Error()
		return vr
	}
	fo := r.confined(fe, c.Vector, &ff)
	if fo.result != nil {
		vr.Backend = fo.result.Backend
		for _, g := range fo.result.Guarantees {
			if g.Name == c.Guarantee {
				vr.Mechanism = g.Mechanism
				if g.Waived {
					vr.Mechanism = "waived"
				}
			}
		}
		r.note(fo.result)
	}
	var problems, seen []string
	if fo.code == 0 && fo.err == nil && !ff.ProbeMayEscape {
		problems = append(problems, "the probe reports the attack worked")
	}
	if ff.Effect != nil {
		ok, d := ff.Effect()
		if ok {
			problems = append(problems, "the selftest saw the effect: "+d)
		}
		seen = append(seen, d)
	}
	if ff.Intact != nil {
		if err := ff.Intact(); err != nil {
			problems = append(problems, "the victim was harmed: "+err.Error())
		}
	}
	switch {
	case fo.refused || fo.err != nil:
		// A run that never started proves nothing about the attack.
		vr.Verdict = Error
		vr.Confined = fo.brief()
	case len(problems) > 0:
		vr.Verdict = Escaped
		vr.Confined = strings.Join(problems, "; ") + " (" + fo.brief() + ")"
	case ff.MustReport && !(fo.hasReport && fo.report.Outcome == "blocked"):
		vr.Verdict = Error
		vr.Confined = "no blocked report from the probe, so nothing was proven: " + fo.brief()
	case ff.ProbeMayEscape:
		// The probe's own success is not the verdict: say what was seen.
		vr.Verdict = Blocked
		vr.Confined = strings.Join(seen, "; ") + "; probe: " + fo.brief()
	default:
		vr.Verdict = Blocked
		vr.Confined = fo.brief()
		if len(seen) > 0 {
			vr.Confined += "; seen: " + strings.Join(seen, "; ")
		}
	}
	return vr
}

// note records the backend and layers a confined run reports.
func (r *runner) note(res *spec.CommandResult) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if res.Backend != "" && !contains(r.backends, res.Backend) {
		r.backends = append(r.backends, res.Backend)
	}
	for _, l := range res.Layers {
		if !contains(r.layers, l) {
			r.layers = append(r.layers, l)
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// controlPATH is the PATH of a control run.
const controlPATH = "PATH=/usr/local/bin:/usr/bin:/bin"

// control runs the probe unconfined, as this user, in the work directory.
func (r *runner) control(e *Env, vector string, f *Fixture) outcome {
	cmd := exec.Command(r.probe, append([]string{ProbeCommand, vector}, f.Args...)...)
	cmd.Dir = e.Workdir
	// exec.Cmd keeps the last of duplicate variables: f.Env wins.
	cmd.Env = append([]string{controlPATH, "HOME=" + e.Workdir, "LANG=C.UTF-8"}, f.Env...)
	f.applyIO(cmd)
	return execute(cmd)
}

// confined runs the probe's vector under `confine run --json`.
func (r *runner) confined(e *Env, vector string, f *Fixture) outcome {
	return r.confinedArgv(e, f, append([]string{vector}, f.Args...))
}

// confinedArgv runs `confine __probe ARGV...` under `confine run --json`.
func (r *runner) confinedArgv(e *Env, f *Fixture, argv []string) outcome {
	args := []string{"run", "--json", "--event-log", "off", "--timeout", "2m", "--workdir", e.Workdir, "--ro", r.bin}
	if r.opts.Backend != "" {
		args = append(args, "--backend", r.opts.Backend)
	}
	if r.opts.Profile != "" {
		args = append(args, "--profile", r.opts.Profile)
	}
	args = append(args, f.RunFlags...)
	args = append(args, "--", r.probe, ProbeCommand)
	args = append(args, argv...)
	cmd := exec.Command(r.opts.Confine, args...)
	cmd.Dir = e.Workdir
	cmd.Env = append(os.Environ(), f.Env...)
	f.applyIO(cmd)
	o := execute(cmd)
	if o.err != nil {
		return o
	}
	// A refusal (exit 125) prints {"error": {...}} instead of a result:
	// the probe never ran.
	var refusal struct {
		Error *json.RawMessage `json:"error"`
	}
	var res spec.CommandResult
	if json.Unmarshal([]byte(o.stdout), &refusal) != nil || refusal.Error != nil ||
		json.Unmarshal([]byte(o.stdout), &res) != nil {
		o.refused = true
		return o
	}
	o.result = &res
	o.stdout = res.Stdout.Text()
	o.stderr = res.Stderr.Text()
	o.report, o.hasReport = fixture.LastReport(o.stdout)
	switch {
	case res.Signal != 0:
		o.signal = syscall.Signal(res.Signal)
		o.code = 128 + res.Signal
	default:
		o.code = res.ExitCode
	}
	if res.TimedOut {
		o.timedOut = true
	}
	return o
}

func (f *Fixture) applyIO(cmd *exec.Cmd) {
	cmd.ExtraFiles = f.Extra
	if f.TTY != nil {
		cmd.Stdin = f.TTY.Slave
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	}
}

// runLimit bounds one process of the selftest: the probe reports within
// 60 s on its own, and confined runs have --timeout 2m.
const runLimit = 3 * time.Minute

// probeReport is the probe's JSON line.
type probeReport = fixture.Report

// outcome is one finished process of the selftest.
type outcome struct {
	err            error // it could not be started or waited for
	code           int
	signal         syscall.Signal
	limitHit       bool
	timedOut       bool
	refused        bool // confine refused the run (no result)
	stdout, stderr string
	report         probeReport
	hasReport      bool
	result         *spec.CommandResult
}

// brief renders the outcome, the probe's detail first (the table clips
// the end): "connect: EPERM (operation not permitted) [exit 1]".
func (o outcome) brief() string {
	var status string
	switch {
	case o.err != nil:
		return fmt.Sprintf("could not run: %v", o.err)
	case o.refused:
		return fmt.Sprintf("confine refused the run: %s [exit %d]", fixture.OneLine(o.stderr, 300), o.code)
	case o.limitHit:
		status = fmt.Sprintf("killed by the selftest after %v", runLimit)
	case o.timedOut:
		status = "timed out"
	case o.signal != 0:
		status = fmt.Sprintf("killed by signal %d (%v)", int(o.signal), o.signal)
	default:
		status = fmt.Sprintf("exit %d", o.code)
	}
	switch {
	case o.hasReport:
		return fmt.Sprintf("%s [%s, %s]", fixture.OneLine(o.report.Detail, 300), o.report.Outcome, status)
	case strings.TrimSpace(o.stderr) != "":
		return fmt.Sprintf("no probe report; stderr: %s [%s]", fixture.OneLine(o.stderr, 300), status)
	}
	return fmt.Sprintf("no probe report [%s]", status)
}

// execute runs cmd to completion (at most runLimit).
func execute(cmd *exec.Cmd) outcome {
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	// A descendant that keeps the output pipes open must not hang us.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return outcome{err: err}
	}
	var mu sync.Mutex
	limitHit := false
	timer := time.AfterFunc(runLimit, func() {
		mu.Lock()
		limitHit = true
		mu.Unlock()
		_ = cmd.Process.Kill() // our own child
	})
	err := cmd.Wait()
	timer.Stop()
	o := outcome{stdout: so.String(), stderr: se.String()}
	mu.Lock()
	o.limitHit = limitHit
	mu.Unlock()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, exec.ErrWaitDelay) {
		o.err = err
		return o
	}
	o.code, o.signal = fixture.ExitStatus(cmd.ProcessState)
	o.report, o.hasReport = fixture.LastReport(o.stdout)
	return o
}
