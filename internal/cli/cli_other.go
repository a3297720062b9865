//go:build !linux && !darwin

package cli

import (
	"fmt"
	"io"

	"github.com/confine-sandbox/confine"
)

// Exit statuses of confine itself.
const (
	ExitTimeout       = 124
	ExitConfine       = 125
	ExitNotExecutable = 126
	ExitNotFound      = 127
)

// Main is the command line on an OS without a backend: `version` answers,
// `check` says there is no backend (exit 1), and everything else refuses
// with the same message (exit 125). Nothing is ever run.
func Main(args []string, stdout, stderr io.Writer) int {
	cmd := ""
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version":
		fmt.Fprintf(stdout, "confine %s (no backends on this OS)\n", versionString())
		return 0
	case "check":
		fmt.Fprintf(stdout, "backend:          NONE\n")
		fmt.Fprintf(stderr, "confine: %s\n", confine.NoBackendMessage)
		return 1
	}
	fmt.Fprintf(stderr, "confine: %s\n", confine.NoBackendMessage)
	return ExitConfine
}
