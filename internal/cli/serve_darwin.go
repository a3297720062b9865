//go:build darwin

package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/confine-sandbox/confine/spec"
)

// ServerEnv names the server `confine run` sends its runs to (refused on
// macOS).
const ServerEnv = "CONFINE_SERVER"

// errNoServe: the warm launcher is Linux only (it checks peers with
// SO_PEERCRED).
var errNoServe = errors.New("confine serve and run --server are not available on macOS")

func addServerFlag(f *pflag.FlagSet, o *runOpts) {
	f.StringVar(&o.server, "server", "", "run through a confine server (Linux only: refused here)")
	f.Lookup("server").NoOptDefVal = "default"
}

func (o *runOpts) viaServer(context.Context, *prepared, io.Writer, io.Writer) (spec.CommandResult, error) {
	return spec.CommandResult{}, errNoServe
}

func newServe(io.Writer) *cobra.Command {
	return &cobra.Command{Use: "serve", Short: "Serve run requests (Linux only)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return &exitError{ExitConfine, errNoServe.Error()} }}
}
