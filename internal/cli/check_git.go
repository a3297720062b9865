//go:build linux || darwin

package cli

import "os"

// workTreeHasGit says the current directory, the work tree of a run
// started here, has a .git, which the persistence guard keeps read-only:
// check shows the ledger such a run gets.
func workTreeHasGit() bool {
	_, err := os.Lstat(".git")
	return err == nil
}
