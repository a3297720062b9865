//go:build linux

package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/internal/plan"
	"github.com/confine-sandbox/confine/spec"
)

// Backend is one of confine's Linux backends: what it contributes to the
// guarantee ledger, and how it launches a plan made for it. The plan
// names its backend (plan.Plan.Backend); Run looks that value up in the
// registry (For) and nothing else decides which backend runs.
//
// macOS's Seatbelt backend launches no plan (seatbelt.Launch); its ledger
// contribution is seatbelt.Ledger.
type Backend interface {
	// Name is the value a plan for the backend carries.
	Name() plan.Backend
	// Ledger names the ledger's layers the backend switches on: the
	// guarantees of its runs are decided from them (ledger.Decide).
	Ledger() []ledger.Layer
	// FallsBack says a run of the backend may find its namespaces
	// impossible to set up and then run the core's plan instead
	// (Fallback): its caller builds that plan too.
	FallsBack() bool
	// launch runs p, a plan for this backend, and waits for it to end.
	launch(ctx context.Context, p *plan.Plan, fb Fallback, pio IO) (*Outcome, error)
}

// registry is every backend; a plan's value finds one by its Name.
var registry = []Backend{core{}, namespaces{}, bubblewrap{}}

// For returns the backend a plan names.
func For(b plan.Backend) (Backend, bool) {
	for _, impl := range registry {
		if impl.Name() == b {
			return impl, true
		}
	}
	return nil, false
}

// Backends returns every backend (a copy of the registry).
func Backends() []Backend { return slices.Clone(registry) }

// core is Landlock, seccomp with its supervisor, rlimits and a
// subreaping init, without namespaces: the launcher clones the init and
// supervises the run itself (runDirect).
type core struct{}

func (core) Name() plan.Backend     { return plan.BackendCore }
func (core) Ledger() []ledger.Layer { return []ledger.Layer{ledger.Core} }
func (core) FallsBack() bool        { return false }

func (core) launch(ctx context.Context, p *plan.Plan, _ Fallback, pio IO) (*Outcome, error) {
	out, err := runDirect(ctx, p, pio, false)
	if out != nil {
		out.Ran = p
	}
	return out, err
}

// namespaces is the core inside new user, PID, mount, network, IPC and
// UTS namespaces, which the launcher's clone of the init creates; where
// they cannot be set up the run falls back to the core's plan, or is
// refused.
type namespaces struct{}

func (namespaces) Name() plan.Backend     { return plan.BackendNamespaces }
func (namespaces) Ledger() []ledger.Layer { return []ledger.Layer{ledger.Core, ledger.Namespaces} }
func (namespaces) FallsBack() bool        { return true }

func (namespaces) launch(ctx context.Context, p *plan.Plan, fb Fallback, pio IO) (*Outcome, error) {
	out, err := runDirect(ctx, p, pio, true)
	var nse *errNamespaces
	if !errors.As(err, &nse) {
		if out != nil {
			out.Ran = p
		}
		return out, err
	}
	switch {
	case fb.Required:
		return &Outcome{Ran: p, Report: plan.Report{StartCode: 125, StartErr: "the run requires namespaces (require_namespaces or --backend), which cannot be set up here: " + nse.msg}}, nil
	case fb.Plan == nil:
		return &Outcome{Ran: p, Report: plan.Report{StartCode: 125, StartErr: "the namespaces cannot be set up here (" + nse.msg + "), and " + fb.Refusal}}, nil
	}
	out, err = core{}.launch(ctx, fb.Plan, Fallback{}, pio)
	if out != nil {
		out.Report.NamespacesSkipped = nse.msg
	}
	return out, err
}

// bubblewrap is the core inside namespaces bwrap creates, under a
// supervisor process this binary re-executes as (runSupervised). It
// never falls back.
type bubblewrap struct{}

func (bubblewrap) Name() plan.Backend     { return plan.BackendBwrap }
func (bubblewrap) Ledger() []ledger.Layer { return []ledger.Layer{ledger.Core, ledger.Bwrap} }
func (bubblewrap) FallsBack() bool        { return false }

func (bubblewrap) launch(ctx context.Context, p *plan.Plan, _ Fallback, pio IO) (*Outcome, error) {
	use, err := pidsCgroup(p)
	if err != nil {
		return nil, err
	}
	sp := p
	if !use && p.PidsCgroup != "" {
		// The supervisor gets its own copy without the cgroup.
		c := *p
		c.PidsCgroup = ""
		sp = &c
	}
	out, err := runSupervised(ctx, sp, pio)
	if out != nil {
		out.Ran, out.NoPidsCgroup = p, !use && p.PidsCgroup != ""
	}
	return out, err
}

// lookup returns the backend p names, refusing an unknown one and a plan
// whose sections disagree with it.
func lookup(p *plan.Plan) (Backend, error) {
	if err := p.CheckBackend(); err != nil {
		return nil, fmt.Errorf("%w: %v", spec.ErrLaunch, err)
	}
	b, ok := For(p.Backend)
	if !ok {
		return nil, fmt.Errorf("%w: plan for backend %s, which has no launch", spec.ErrLaunch, p.Backend)
	}
	return b, nil
}
