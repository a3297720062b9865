//go:build linux || darwin

package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine/internal/eventlog"
	"github.com/confine-sandbox/confine/policy"
)

// newApprove is `confine approve REQUEST_ID`: the answer to a refused
// connection of a network allowlist run. It finds the request in the
// event log and prints a grant token, signed with the capability key,
// that lets runs of the same task reach that host and port until it
// expires (`confine run --approval TOKEN`).
func newApprove(stdout, stderr io.Writer) *cobra.Command {
	var keyPath, logFlag string
	ttl := time.Hour
	cmd := &cobra.Command{
		Use:   "approve REQUEST_ID",
		Short: "Grant a refused connection (a network allowlist run's approval request): prints a token for run --approval",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return &exitError{ExitConfine, "approve needs one REQUEST_ID (from the refusal, --json or confine inspect)"}
			}
			return nil
		},
		RunE: func(_ *cobra.Command, args []string) error {
			logPath, err := eventLogPath(logFlag)
			if err != nil || logPath == "" {
				return &exitError{ExitConfine, "approve reads the event log, which is off"}
			}
			ev, c, err := eventlog.FindApprovalRequest(logPath, args[0])
			if err != nil {
				return confineFailed(err)
			}
			eng, err := engineFromKey(keyPath)
			if err != nil {
				return confineFailed(err)
			}
			tok, g, err := eng.GrantEgress(policy.EgressGrant{Request: c.ApprovalRequest, Task: c.TaskID, Host: c.Domain, Port: c.Port}, ttl)
			if err != nil {
				return confineFailed(err)
			}
			task := g.Task
			if task == "" {
				task = "(runs without a task id)"
			}
			fmt.Fprintf(stderr, "confine: approval %s: %s:%d for task %s until %s (request %s of run %s)\n",
				g.ID, g.Host, g.Port, task, g.Expires.Format(time.RFC3339), c.ApprovalRequest, ev.RunID)
			fmt.Fprintln(stdout, tok)
			return nil
		},
	}
	cmd.Flags().StringVar(&keyPath, "cap-key", "", "key file that signs the grant (default $XDG_CONFIG_HOME/confine/cap.key)")
	cmd.Flags().StringVar(&logFlag, "event-log", "", "event log holding the request (default as for run)")
	cmd.Flags().Var(durFlag{&ttl}, "ttl", "how long the grant is valid (default 1h, at most 720h)")
	return cmd
}
