//go:build linux

package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine/internal/probe"
	"github.com/confine-sandbox/confine/internal/provider"
	"github.com/confine-sandbox/confine/internal/selftest"
	"github.com/confine-sandbox/confine/policy"
)

// isProbe says whether args ask for the escape probe this binary carries.
func isProbe(args []string) bool { return len(args) > 0 && args[0] == selftest.ProbeCommand }

// runProbe is `confine __probe VECTOR ARGS...`: the escape probe carried in
// this binary, which `confine selftest` runs unconfined and under `confine
// run`. Hidden from help; its output is the probe's JSON line on stdout.
func runProbe(args []string) int {
	return probe.MainAs([]string{selftest.ProbeCommand}, args)
}

func newSelftest(stdout, stderr io.Writer) *cobra.Command {
	var asJSON, quiet bool
	var backend, dir, profile string
	var only []string
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Attack the sandbox on this host: every escape probe unconfined (the control) and under confine run",
		Long: `Run the project's escape probes through the real launch path on this host,
each first unconfined (the control, which must escape for the vector to
apply here) and then under 'confine run', and print per guarantee the
mechanism the runs reported and each vector's verdict. The attacks target
only loopback listeners, unix sockets, files and processes the selftest
made itself. Exit 0 when nothing escaped, 1 when something did, 125 when
the selftest could not run (or could not judge a vector).`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if backend != "auto" {
				if _, ok := provider.Lookup(backend); !ok {
					return &exitError{ExitConfine, fmt.Sprintf("--backend %q: unknown backend (auto, namespaces, core, bwrap)", backend)}
				}
			}
			cases, err := selftest.Select(selftest.Cases(), only)
			if err != nil {
				return confineFailed(err)
			}
			self, err := os.Executable()
			if err != nil {
				return &exitError{ExitConfine, fmt.Sprintf("selftest: this binary's path: %v", err)}
			}
			if profile != "" {
				// A profile file is read by every confined run: make its
				// path absolute, as their work directories differ.
				if _, err := policy.ResolveProfile(profile); err != nil {
					return confineFailed(err)
				}
				if strings.ContainsRune(profile, '/') {
					if profile, err = filepath.Abs(profile); err != nil {
						return confineFailed(err)
					}
				}
			}
			o := selftest.Options{Confine: self, Backend: backend, Dir: dir, Profile: profile}
			if !quiet {
				o.Progress = stderr
			}
			rep, err := selftest.Run(o, cases)
			if err != nil {
				return confineFailed(err)
			}
			if asJSON {
				err = rep.WriteJSON(stdout)
			} else {
				err = rep.WriteText(stdout)
			}
			if err != nil {
				return confineFailed(err)
			}
			switch {
			case rep.Escaped > 0:
				return &exitError{1, fmt.Sprintf("selftest: %d of %d vectors escaped", rep.Escaped, len(rep.Vectors))}
			case rep.Errors > 0:
				return &exitError{ExitConfine, fmt.Sprintf("selftest: %d vectors could not be judged", rep.Errors)}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&asJSON, "json", false, "print the report as one JSON object")
	f.BoolVarP(&quiet, "quiet", "q", false, "no progress lines on stderr")
	f.StringVar(&backend, "backend", "auto", "backend of the confined runs: auto, namespaces, core, bwrap")
	f.StringVar(&profile, "profile", "", "profile of the confined runs (default: default); a guarantee it waives is attacked all the same")
	f.StringVar(&dir, "dir", "", "where to make the scratch directory (default $TMPDIR or /tmp); must allow exec")
	f.StringArrayVar(&only, "vector", nil, "run only this vector or every vector of this guarantee (repeatable)")
	return cmd
}
