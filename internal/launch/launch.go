//go:build linux

// Package launch is the launcher side of a run, one Backend per value of
// plan.Backend (backend.go). The core and landlock+namespaces clone the
// run's init from a prepared program and supervise the run in this
// process (direct.go); bubblewrap re-executes the host binary as the
// supervisor, hands it the plan, captures the command's output with
// bounded memory, relays cancellation and collects the report.
//
// Any binary that links this package can act as its own reaper,
// bubblewrap supervisor and init: Init, which main calls through
// confine.Init, turns it into the one its argv[0] names.
package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/confine-sandbox/confine/internal/bwrap"
	"github.com/confine-sandbox/confine/internal/bwrap/inside"
	"github.com/confine-sandbox/confine/internal/bwrap/supervise"
	"github.com/confine-sandbox/confine/internal/capture"
	"github.com/confine-sandbox/confine/internal/gocacheprog"
	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/nsinit"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/internal/reaper"
	"github.com/confine-sandbox/confine/spec"
)

// dispatched records that Init ran: a run re-executes its own program
// as the reaper or the bubblewrap supervisor and init, and a program that
// never dispatches would start its own main in their place.
var dispatched atomic.Bool

// Init turns this process into the run helper its argv[0] names (the
// reaper, the bubblewrap supervisor, bubblewrap's init and its confining re-exec) and
// never returns then; otherwise it returns at once. confine.Init calls it
// first thing in main, as runc's init does, so helpers never reach the
// host program's own code.
func Init() {
	dispatched.Store(true)
	if len(os.Args) == 0 {
		return
	}
	switch os.Args[0] {
	case supervise.Arg0:
		os.Exit(supervise.Main())
	case reaper.Arg0:
		os.Exit(reaper.Main())
	case bwrap.InitPath:
		os.Exit(inside.Main())
	}
	if filepath.Base(os.Args[0]) == gocacheprog.Arg0 {
		// go's GOCACHEPROG inside the sandbox, through the run's own
		// symlink to this program.
		os.Exit(gocacheprog.Relay())
	}
}

// ErrNoInit is returned by Run in a program that never called Init
// (confine.Init): its re-executions as a run's helpers would run its main.
var ErrNoInit = errors.New("confine.Init() was not called at the start of main")

// IO connects a run to the caller.
type IO struct {
	// Stdin is copied to the command; nil gives it /dev/null.
	Stdin io.Reader
	// Stdout and Stderr, when set, receive the output live, at most
	// LiveLimit bytes each (0: unlimited).
	Stdout, Stderr io.Writer
	LiveLimit      int64
	// OutputLimit is how many bytes of each stream are kept.
	OutputLimit int64
	// Egress receives the supervisor's egress events (network =
	// "allowlist"); nil ignores them.
	Egress *Egress
	// DetachCleanup lets a run return as soon as its tree is gone and its
	// init reported, leaving the removal of the private directory and
	// the pids cgroup to that init (landlock+namespaces only; see
	// Outcome.CleanupDetached).
	DetachCleanup bool
	// NetPool, when set, gives a namespaced run's init a network
	// namespace made ahead (nsinit.NetPool); nil: the clone makes one.
	NetPool *nsinit.NetPool
}

// Outcome is what one run produced.
type Outcome struct {
	Report         plan.Report
	Stdout, Stderr spec.Stream
	// CleanupDetached says the run's init removes the private directory
	// and the pids cgroup after Run returned: the caller must not.
	CleanupDetached bool
	// Ran is the plan that ran: the one Run was given, or the fallback's
	// when the namespaces could not be set up (Report.NamespacesSkipped
	// then says why).
	Ran *plan.Plan
	// NoPidsCgroup says the run went without its pids cgroup, which could
	// not be created and whose guarantee the profile waived.
	NoPidsCgroup bool
}

// Fallback is the same run planned for the core, built by the caller
// before the launch. When the namespaces of the plan given to Run cannot
// be set up, Run executes Plan instead; a nil Plan refuses the run with
// Refusal. Run never edits a plan to fall back.
type Fallback struct {
	Plan *plan.Plan
	// Required says the run asked for namespaces by name
	// (require_namespaces or --backend) and may not leave them.
	Required bool
	// Refusal says why there is no fallback plan.
	Refusal string
}

// Run executes p with the backend it names (For) and waits for it to
// finish. A cancelled ctx ends the command's whole tree (SIGTERM,
// grace, SIGKILL).
func Run(ctx context.Context, p *plan.Plan, fb Fallback, pio IO) (*Outcome, error) {
	if !dispatched.Load() {
		return nil, fmt.Errorf("%w: %w", spec.ErrLaunch, ErrNoInit)
	}
	b, err := lookup(p)
	if err != nil {
		return nil, err
	}
	if fb.Plan != nil {
		if err := fb.Plan.CheckBackend(); err != nil {
			return nil, fmt.Errorf("%w: fallback: %v", spec.ErrLaunch, err)
		}
		if fb.Plan.Backend != plan.BackendCore {
			return nil, fmt.Errorf("%w: fallback: a plan for %s, not the core", spec.ErrLaunch, fb.Plan.Backend)
		}
	}
	return b.launch(ctx, p, fb, pio)
}

// pidsCgroup creates p's pids cgroup for a run that joins it, and says
// whether the run uses it. Where it cannot be created, a run whose
// guarantee is waived goes without; others are refused.
func pidsCgroup(p *plan.Plan) (bool, error) {
	if p.PidsCgroup == "" {
		return false, nil
	}
	err := host.CreatePidsCgroup(p.PidsCgroup, p.PidsMax)
	switch {
	case err == nil || errors.Is(err, fs.ErrExist):
		// Exists: created for a namespaces attempt this run fell back from.
		return true, nil
	case p.PidsOptional:
		return false, nil
	}
	return false, fmt.Errorf("%w: %s: cannot create a pids cgroup: %v", spec.ErrUnavailable, spec.GProcesses, err)
}

// runSupervised runs p under a supervisor process.
func runSupervised(ctx context.Context, p *plan.Plan, pio IO) (*Outcome, error) {
	var closers []*os.File
	closeAll := func() {
		for _, f := range closers {
			f.Close()
		}
	}
	defer closeAll()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			closers = append(closers, r, w)
		}
		return
	}
	ctrlR, ctrlW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", spec.ErrLaunch, err)
	}
	repR, repW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", spec.ErrLaunch, err)
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", spec.ErrLaunch, err)
	}
	errR, errW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("%w: pipe: %v", spec.ErrLaunch, err)
	}
	// Bigger pipes cut context switches on floods.
	capture.GrowPipe(outR, 1<<20)
	capture.GrowPipe(errR, 1<<20)

	var stdin, stdinW *os.File
	if pio.Stdin != nil {
		if stdin, stdinW, err = pipe(); err != nil {
			return nil, fmt.Errorf("%w: pipe: %v", spec.ErrLaunch, err)
		}
	} else {
		if stdin, err = os.Open(os.DevNull); err != nil {
			return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
		}
		closers = append(closers, stdin)
	}

	proc, err := os.StartProcess("/proc/self/exe", []string{supervise.Arg0}, &os.ProcAttr{
		Files: []*os.File{stdin, outW, errW, ctrlR, repW},
	})
	if err != nil {
		return nil, fmt.Errorf("%w: start supervisor: %v", spec.ErrLaunch, err)
	}
	// Only the supervisor and its descendants may hold these ends, so EOF
	// means they are all gone.
	for _, f := range []*os.File{stdin, outW, errW, ctrlR, repW} {
		f.Close()
	}

	streams := startStreams(pio, outR, errR, stdinW)

	if err := plan.Write(ctrlW, p); err != nil {
		// The supervisor sees EOF, kills what it started and reports.
		ctrlW.Close()
	}
	repCh := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(repR, 1<<20))
		repCh <- b
	}()
	var raw []byte
	select {
	case raw = <-repCh:
	case <-ctx.Done():
		_, _ = ctrlW.Write([]byte{'c'})
		raw = <-repCh
	}
	ctrlW.Close()
	state, werr := proc.Wait()
	stdout, stderr, cerr := streams()

	out := &Outcome{Stdout: stdout, Stderr: stderr}
	if len(raw) == 0 {
		return out, fmt.Errorf("%w: supervisor ended without a report (%v %v)", spec.ErrLaunch, state, werr)
	}
	if err := json.Unmarshal(raw, &out.Report); err != nil {
		return out, fmt.Errorf("%w: bad supervisor report: %v", spec.ErrLaunch, err)
	}
	if cerr != nil {
		return out, fmt.Errorf("%w: capture: %v", spec.ErrLaunch, cerr)
	}
	return out, nil
}

// startStreams drains the command's stdout and stderr into bounded
// captures (and the live writers) and copies pio.Stdin into stdinW, when
// set. The returned function waits for both streams' EOF.
func startStreams(pio IO, outR, errR, stdinW *os.File) func() (stdout, stderr spec.Stream, err error) {
	outBuf := capture.New(pio.OutputLimit, pio.Stdout, pio.LiveLimit)
	errBuf := capture.New(pio.OutputLimit, pio.Stderr, pio.LiveLimit)
	var wg sync.WaitGroup
	var outErr, errErr error
	wg.Add(2)
	go func() { defer wg.Done(); outErr = capture.Drain(outR, outBuf) }()
	go func() { defer wg.Done(); errErr = capture.Drain(errR, errBuf) }()
	if stdinW != nil {
		go func() {
			_, _ = io.Copy(stdinW, pio.Stdin)
			stdinW.Close()
		}()
	}
	return func() (spec.Stream, spec.Stream, error) {
		wg.Wait()
		return outBuf.Stream(), errBuf.Stream(), errors.Join(outErr, errErr)
	}
}
