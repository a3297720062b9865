package seatbelt

import (
	"fmt"
	"os"

	"github.com/confine-sandbox/confine/internal/ledger"
	"github.com/confine-sandbox/confine/spec"
)

// Name is the backend's name in results, `confine check` and --backend.
const Name = "seatbelt"

// Available says whether sandbox-exec is there to run, or why not. It is
// asked at run time: a host without it refuses every run.
func Available() error {
	st, err := os.Stat(SandboxExec)
	if err != nil {
		return fmt.Errorf("%w: %s backend: %s: %v", spec.ErrUnavailable, Name, SandboxExec, err)
	}
	if !st.Mode().IsRegular() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%w: %s backend: %s is not an executable file", spec.ErrUnavailable, Name, SandboxExec)
	}
	return nil
}

// Ledger names the ledger's layers the backend switches on: Seatbelt
// alone, none of the Linux ones. (It launches no plan, so it is not one
// of launch's backends.)
func Ledger() []ledger.Layer { return []ledger.Layer{ledger.Seatbelt} }

// Decide resolves the ledger for this backend: what Seatbelt enforces on
// its own, and what it cannot (those are refused unless waived). gitDir:
// the work tree has a .git the persistence guard keeps read-only
// (Spec.ReadOnly).
func Decide(rootCommand, gitDir bool) []ledger.Decision {
	return ledger.Decide(Ledger(), ledger.Facts{SandboxExec: Available() == nil, RootCommand: rootCommand, GitDir: gitDir})
}
