//go:build !linux && !darwin

package confine

import (
	"context"
	"fmt"
	"runtime"

	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// Backends names the backends this build can run: none.
func Backends() []string { return nil }

// NoBackendMessage is what every refusal on this OS says.
const NoBackendMessage = "confine has no native sandbox backend on this operating system yet; run it under WSL2 or in a Linux container"

// RunCommand refuses: there is no backend on this OS (Windows: no
// AppContainer or job-object backend yet), and confine never runs a
// command unconfined. The error wraps spec.ErrUnavailable and
// spec.ErrUnsupportedOS.
func (l *Launcher) RunCommand(ctx context.Context, c *policy.Cap, s spec.CommandSpec) (spec.CommandResult, error) {
	return spec.CommandResult{}, fmt.Errorf("%w: %w (%s): %s", spec.ErrUnavailable, spec.ErrUnsupportedOS, runtime.GOOS, NoBackendMessage)
}

// defaultMemory is a run's memory bound when neither its profile nor its
// spec sets one: nothing runs here, so the fallback stands.
func defaultMemory(fallback int64) int64 { return fallback }
