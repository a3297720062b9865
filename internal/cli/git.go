//go:build linux

package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine/hostop/git"
)

func newGit(stdout, stderr io.Writer) *cobra.Command {
	o := &hostOpts{}
	var author string
	c := &cobra.Command{
		Use:   "git",
		Short: "Tier 1 git: fixed subcommands that run no hook and no configured program",
		Long: `Tier 1 git on the repository at --root: status, diff, log, show, add and
commit. git runs inside a Tier 2 confine run, on a private git directory whose
configuration holds only inert keys copied from the repository's, with every
executable setting overridden, no hooks and an environment built from scratch.
Exit 0 on success, 1 when git itself failed (its stderr is shown), 125 when
the operation is refused.`,
	}
	o.flags(c)
	c.PersistentFlags().StringVar(&author, "author", "", `commit identity "Name <email>" (default: user.name and user.email of the repository)`)
	do := func(cmd *cobra.Command, f func(ctx context.Context, r *git.Repo) (git.Result, error)) error {
		return runGit(cmd.Context(), o, author, stdout, stderr, f)
	}
	status := &cobra.Command{
		Use: "status", Short: "Changed, staged and untracked paths", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Status(ctx) })
		},
	}
	var cached bool
	diff := &cobra.Command{
		Use: "diff [PATH...]", Short: "Work tree against the index (--cached: index against HEAD)",
		RunE: func(cmd *cobra.Command, args []string) error {
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Diff(ctx, cached, args...) })
		},
	}
	diff.Flags().BoolVar(&cached, "cached", false, "the staged changes")
	var n int
	log := &cobra.Command{
		Use: "log [REV]", Short: "The last commits reachable from REV (default HEAD)", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev := ""
			if len(args) == 1 {
				rev = args[0]
			}
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Log(ctx, n, rev) })
		},
	}
	log.Flags().IntVarP(&n, "max-count", "n", 20, "commits shown at most")
	show := &cobra.Command{
		Use: "show [REV]", Short: "A commit and its patch (default HEAD)", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rev := ""
			if len(args) == 1 {
				rev = args[0]
			}
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Show(ctx, rev) })
		},
	}
	add := &cobra.Command{
		Use: "add PATH...", Short: "Stage paths", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Add(ctx, args...) })
		},
	}
	var msg string
	commit := &cobra.Command{
		Use: "commit -m MESSAGE", Short: "Commit the index (no hooks, no signing, no editor)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if msg == "" {
				return o.fail(stdout, fmt.Errorf("%w: commit needs -m MESSAGE", git.ErrBadArg))
			}
			return do(cmd, func(ctx context.Context, r *git.Repo) (git.Result, error) { return r.Commit(ctx, msg+"\n") })
		},
	}
	commit.Flags().StringVarP(&msg, "message", "m", "", "the commit message")
	c.AddCommand(status, diff, log, show, add, commit)
	return c
}

// runGit runs one Tier 1 git operation f on the repository at o's root as
// author, and prints its result.
func runGit(ctx context.Context, o *hostOpts, author string, stdout, stderr io.Writer, f func(ctx context.Context, r *git.Repo) (git.Result, error)) error {
	h, err := o.host(stderr)
	if err != nil {
		return o.fail(stdout, err)
	}
	defer h.Close()
	r := git.New(h)
	r.Author = author
	res, err := f(ctx, r)
	if err != nil && !errors.Is(err, git.ErrGit) {
		return o.fail(stdout, err)
	}
	if o.json {
		// A failing git keeps its output; "error" has the shape of
		// run's refusal object, kind "git".
		type gitError struct {
			Kind       string `json:"kind"`
			Message    string `json:"message"`
			ExitStatus int    `json:"exit_status"`
		}
		v := struct {
			JSONAPI int `json:"json_api"`
			git.Result
			Error *gitError `json:"error,omitempty"`
		}{JSONAPI: JSONAPI, Result: res}
		if err != nil {
			v.Error = &gitError{"git", err.Error(), 1}
		}
		if werr := writeJSON(stdout, v); werr != nil {
			return werr
		}
	} else {
		switch {
		case res.Subcommand == "status" && err == nil:
			for _, e := range res.Status {
				fmt.Fprintf(stdout, "%s%s %s\n", e.X, e.Y, e.Path)
			}
		case res.Subcommand == "log" && err == nil:
			for _, e := range res.Log {
				fmt.Fprintf(stdout, "%.12s %s\n", e.Hash, e.Subject)
			}
		default:
			_, _ = io.WriteString(stdout, res.Stdout.Text())
		}
		if err != nil {
			_, _ = io.WriteString(stderr, res.Stderr.Text())
		}
	}
	if err != nil {
		return &exitError{1, err.Error()}
	}
	return nil
}
