//go:build linux

package confine

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// ProbeNamespaces says whether the landlock+namespaces backend can run
// commands here, by running `true` under it exactly as a run would: the
// same plan, the same prepared program, the same namespace set-up and
// layout. It returns nil when that run succeeded under the namespaces,
// and otherwise the reason the run gave (the clone refused, a set-up step
// that failed, what restricts user namespaces here).
func ProbeNamespaces(ctx context.Context) error {
	eng, err := policy.NewEngine()
	if err != nil {
		return err
	}
	c, err := eng.Mint("default", "probe", 0)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "confine-probe-")
	if err != nil {
		return fmt.Errorf("%w: probe work directory: %v", spec.ErrLaunch, err)
	}
	defer os.RemoveAll(dir)
	l := &Launcher{Backend: provider.Namespaces}
	res, err := l.RunCommand(ctx, c, spec.CommandSpec{Program: "true", Worktree: dir, Profile: "default"})
	switch {
	case err != nil:
		return fmt.Errorf("%s", strings.TrimPrefix(err.Error(), spec.ErrLaunch.Error()+": "))
	case res.Backend != provider.Namespaces || res.ExitCode != 0:
		return fmt.Errorf("probe run: backend %s, exit %d", res.Backend, res.ExitCode)
	}
	return nil
}
