//go:build linux || darwin

package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// serverArgument reads `run --server SOCKET ...`, with a space. --server
// alone means the default socket (--server=SOCKET names another), so the
// flag parser leaves a socket written after a space as the first argument,
// where it would be taken for the program. The rules, in order, when
// --server was given without a value and no -- came before the arguments:
//
//   - the first argument is an existing unix socket, or ends in ".sock":
//     it is the socket (no program is a socket), and the flags after it
//     are parsed as if they stood before it;
//   - the first argument is followed by --: ambiguous (a socket path that
//     is not there yet, or a program and its arguments?), refused with
//     both unambiguous spellings;
//   - otherwise it is the program, run through the default socket.
//
// It returns the arguments left for the program.
func serverArgument(f *pflag.FlagSet, args []string) ([]string, error) {
	fl := f.Lookup("server")
	if fl == nil || !f.Changed("server") || fl.Value.String() != fl.NoOptDefVal || f.ArgsLenAtDash() == 0 || len(args) == 0 {
		return args, nil
	}
	first := args[0]
	if !isSocketArg(first) {
		if len(args) > 1 && args[1] == "--" {
			return nil, &exitError{ExitConfine, fmt.Sprintf(
				"--server %s --: is %s the server's socket or the program? Write --server=%s for a socket, or --server -- %s to run it through the default server",
				first, first, first, strings.Join(append([]string{first}, args[2:]...), " "))}
		}
		return args, nil
	}
	if err := fl.Value.Set(first); err != nil {
		return nil, &exitError{ExitConfine, fmt.Sprintf("--server %s: %v", first, err)}
	}
	if err := f.Parse(args[1:]); err != nil {
		return nil, confineFailed(err)
	}
	rest := f.Args()
	if len(rest) == 0 {
		return nil, &exitError{ExitConfine, "run needs a PROGRAM after --"}
	}
	return rest, nil
}

// isSocketArg says whether a run's first argument names a server socket:
// a unix socket that exists, or a path ending in ".sock" (a server that
// is not there is then refused as such, never run as a program).
func isSocketArg(a string) bool {
	if strings.HasSuffix(a, ".sock") {
		return true
	}
	st, err := os.Stat(a)
	return err == nil && st.Mode()&os.ModeSocket != 0
}
