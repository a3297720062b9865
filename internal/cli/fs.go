//go:build linux

package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine/hostop"
	"github.com/confine-sandbox/confine/internal/esc"
	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/policy"
)

// addTier1 adds the Tier 1 commands (host operations that execute nothing
// arbitrary): confine fs and confine git. They are Linux's: confined
// paths rest on openat2.
func addTier1(root *cobra.Command, stdout, stderr io.Writer) {
	root.AddCommand(newFS(stdout, stderr), newGit(stdout, stderr), newMCP(stderr))
}

// hostOpts are the flags every Tier 1 command (confine fs, confine git)
// shares.
type hostOpts struct {
	root     string
	profile  string
	capToken string
	capKey   string
	json     bool
	eventLog string
}

func (o *hostOpts) flags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	f.StringVar(&o.root, "root", "", "the directory every path is confined to (default: current directory)")
	f.StringVar(&o.profile, "profile", "host", "tier 1 profile: host, host-readonly, or a TOML file with tier = 1 and host_ops")
	f.StringVar(&o.capToken, "cap", "", "use this signed capability token (from `confine cap mint` for a tier 1 profile)")
	f.StringVar(&o.capKey, "cap-key", "", "key file that verifies --cap tokens (default $XDG_CONFIG_HOME/confine/cap.key)")
	f.BoolVar(&o.json, "json", false, "print the result (or the error) as one JSON object")
	f.StringVar(&o.eventLog, "event-log", "", "JSON-lines event log (default $CONFINE_EVENT_LOG, else $XDG_STATE_HOME/confine/events.jsonl; \"off\" disables)")
}

// host authorises the profile and opens the root.
func (o *hostOpts) host(stderr io.Writer) (*hostop.Host, error) {
	prof, err := policy.ResolveProfile(o.profile)
	if err != nil {
		return nil, err
	}
	eng, err := engineFor(prof, o.capToken != "", o.capKey)
	if err != nil {
		return nil, err
	}
	var c *policy.HostOpCap
	if o.capToken == "" {
		c, err = eng.MintHostOp(prof.Name, "cli", 0)
	} else {
		c, err = eng.HostOpFromToken(strings.TrimSpace(o.capToken))
		if err == nil && c.Profile() != prof.Name {
			err = fmt.Errorf("token is for profile %q, --profile is %q", c.Profile(), prof.Name)
		}
	}
	if err != nil {
		return nil, err
	}
	root := o.root
	if root == "" {
		if root, err = os.Getwd(); err != nil {
			return nil, err
		}
	}
	if root, err = absClean(root); err != nil {
		return nil, err
	}
	h, err := hostop.NewHost(c, root)
	if err != nil {
		return nil, err
	}
	if h.EventLog, err = eventLogPath(o.eventLog); err != nil {
		h.Close()
		return nil, err
	}
	h.EventLogError = func(err error) { fmt.Fprintf(stderr, "confine: %s\n", esc.Text(err.Error())) }
	return h, nil
}

// fail reports err: with --json as run's refusal object on stdout, its
// kind naming the sentinel (hostop.ErrorKind), and as exit status 125
// (ExitGuard for the persistence guard's refusals) with the reason on
// stderr either way.
func (o *hostOpts) fail(stdout io.Writer, err error) error {
	status := ExitConfine
	if errors.Is(err, guardset.ErrProtected) {
		status = ExitGuard
	}
	if o.json {
		r := refusalJSON{JSONAPI: JSONAPI}
		r.Error.Kind, r.Error.Message, r.Error.ExitStatus = hostop.ErrorKind(err), err.Error(), status
		_ = writeJSON(stdout, r)
	}
	if status == ExitConfine {
		return confineFailed(err)
	}
	return &exitError{status, err.Error()}
}

// ExitGuard is the exit status of a Tier 1 write the persistence guard
// refused (a path in the protected set, internal/guardset): distinct from
// ExitConfine's other refusals, so a caller can tell "this path is never
// writable here" from a bad path or a failure.
const ExitGuard = 121

// noteGuard tells stderr about a write the persistence guard reports.
func noteGuard(stderr io.Writer, path, row string) {
	if row != "" {
		fmt.Fprintf(stderr, "confine: persistence guard: %s is in the protected set (%s): written and reported\n", esc.Text(path), esc.Text(row))
	}
}

// hostRun is one Tier 1 operation from end to end: it opens the root
// under the profile's capability, runs op on it (the Host checks the
// operation against the capability and records it in the event log), and
// prints the result: as JSON with --json, else with text (nil: nothing).
// A refusal or failure goes through fail.
func hostRun[R any](o *hostOpts, stdout, stderr io.Writer, op func(*hostop.Host) (R, error), text func(R) error) error {
	h, err := o.host(stderr)
	if err != nil {
		return o.fail(stdout, err)
	}
	defer h.Close()
	res, err := op(h)
	if err != nil {
		return o.fail(stdout, err)
	}
	if o.json {
		return writeVersioned(stdout, res)
	}
	if text == nil {
		return nil
	}
	return text(res)
}

// readInput reads at most limit bytes from r; more is an error.
func readInput(r io.Reader, limit int64, what string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: more than %d bytes", what, hostop.ErrTooLarge, limit)
	}
	return b, nil
}

func newFS(stdout, stderr io.Writer) *cobra.Command {
	o := &hostOpts{}
	c := &cobra.Command{
		Use:   "fs",
		Short: "Tier 1 file operations on paths confined to --root (no command runs)",
		Long: `Tier 1 file operations: every path is relative to --root and resolved beneath
it by the kernel in the same call that uses it. Absolute paths, ".." components,
symlinks leading out of the root, special files and files with several hard
links are refused; writes go through no symlink at all and replace files
atomically. Writes into git metadata (.git at any depth, a git directory) are
refused by the persistence guard unless the profile waives no-git-persistence;
writes to editor and shell files (.envrc, .vscode, .idea) are reported. Exit 0
on success (search: 1 when nothing matched), 121 when the persistence guard
refuses a write, 125 when the operation is otherwise refused or fails.`,
	}
	o.flags(c)
	c.AddCommand(fsRead(o, stdout, stderr), fsWrite(o, stdout, stderr), fsPatch(o, stdout, stderr),
		fsSearch(o, stdout, stderr), fsList(o, stdout, stderr))
	return c
}

// fsRead is `confine fs read`.
func fsRead(o *hostOpts, stdout, stderr io.Writer) *cobra.Command {
	var limit int64
	read := &cobra.Command{
		Use:   "read PATH",
		Short: "Print a file (bounded: head and tail beyond --limit)",
		Args:  cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return hostRun(o, stdout, stderr, func(h *hostop.Host) (hostop.ReadResult, error) {
				return h.ReadFile(args[0], limit)
			}, func(res hostop.ReadResult) error {
				_, err := io.WriteString(stdout, res.Content.Text())
				return err
			})
		},
	}
	read.Flags().Var(sizeFlag{&limit}, "limit", "bytes returned at most, half head and half tail (default 1MiB)")
	return read
}

// fsWrite is `confine fs write`.
func fsWrite(o *hostOpts, stdout, stderr io.Writer) *cobra.Command {
	var wlimit int64
	write := &cobra.Command{
		Use:   "write PATH",
		Short: "Replace (or create) a file with standard input, atomically",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			lim := wlimit
			if lim <= 0 {
				lim = hostop.DefaultWriteLimit
			}
			data, err := readInput(cmd.InOrStdin(), lim, "standard input")
			if err != nil {
				return o.fail(stdout, err)
			}
			return hostRun(o, stdout, stderr, func(h *hostop.Host) (hostop.WriteResult, error) {
				res, err := h.WriteFile(args[0], data, hostop.WriteOptions{Limit: lim})
				noteGuard(stderr, res.Path, res.Guard)
				return res, err
			}, nil)
		},
	}
	write.Flags().Var(sizeFlag{&wlimit}, "limit", "largest content accepted (default 64MiB)")
	return write
}

// fsPatch is `confine fs patch`.
func fsPatch(o *hostOpts, stdout, stderr io.Writer) *cobra.Command {
	patch := &cobra.Command{
		Use:   "patch",
		Short: "Apply a unified diff from standard input, all or nothing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			diff, err := readInput(cmd.InOrStdin(), hostop.DefaultWriteLimit, "patch")
			if err != nil {
				return o.fail(stdout, err)
			}
			return hostRun(o, stdout, stderr, func(h *hostop.Host) (hostop.PatchResult, error) {
				return h.ApplyPatch(diff, 0)
			}, func(res hostop.PatchResult) error {
				for _, f := range res.Files {
					fmt.Fprintf(stdout, "%s %s\n", f.Action, f.Path)
					noteGuard(stderr, f.Path, f.Guard)
				}
				return nil
			})
		},
	}
	return patch
}

// fsSearch is `confine fs search`.
func fsSearch(o *hostOpts, stdout, stderr io.Writer) *cobra.Command {
	var so hostop.SearchOptions
	search := &cobra.Command{
		Use:   "search PATTERN [PATH]",
		Short: "Search files for a regular expression (RE2), skipping .git and binaries",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			rel := "."
			if len(args) == 2 {
				rel = args[1]
			}
			matched := false
			err := hostRun(o, stdout, stderr, func(h *hostop.Host) (hostop.SearchResult, error) {
				res, err := h.Search(cmd.Context(), rel, args[0], so)
				matched = len(res.Matches) > 0
				return res, err
			}, func(res hostop.SearchResult) error {
				w := bufio.NewWriterSize(stdout, 64<<10)
				var line []byte
				for _, m := range res.Matches {
					line = append(line[:0], m.Path...)
					line = append(line, ':')
					line = strconv.AppendInt(line, int64(m.Line), 10)
					line = append(line, ':')
					line = append(line, m.Text...)
					line = append(line, '\n')
					w.Write(line)
				}
				if err := w.Flush(); err != nil {
					return err
				}
				if res.Truncated {
					fmt.Fprintln(stderr, "confine: search stopped at its bound (--max-matches or --max-files)")
				}
				return nil
			})
			if err == nil && !matched {
				return &exitError{1, ""}
			}
			return err
		},
	}
	search.Flags().IntVar(&so.MaxMatches, "max-matches", 0, "stop after this many matching lines (default 1000)")
	search.Flags().Var(sizeFlag{&so.MaxFileSize}, "max-file-size", "skip larger files (default 8MiB)")
	search.Flags().IntVar(&so.MaxFiles, "max-files", 0, "stop after this many files (default 200000)")
	return search
}

// fsList is `confine fs ls`.
func fsList(o *hostOpts, stdout, stderr io.Writer) *cobra.Command {
	var llimit int
	ls := &cobra.Command{
		Use:   "ls [PATH]",
		Short: "List a directory without following its entries",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			rel := "."
			if len(args) == 1 {
				rel = args[0]
			}
			return hostRun(o, stdout, stderr, func(h *hostop.Host) (hostop.ListResult, error) {
				return h.List(rel, llimit)
			}, func(res hostop.ListResult) error {
				for _, e := range res.Entries {
					if e.Target != "" {
						fmt.Fprintf(stdout, "%-8s %10d %s -> %s\n", e.Type, e.Size, e.Name, e.Target)
					} else {
						fmt.Fprintf(stdout, "%-8s %10d %s\n", e.Type, e.Size, e.Name)
					}
				}
				return nil
			})
		},
	}
	ls.Flags().IntVar(&llimit, "limit", 0, "entries listed at most (default 10000)")
	return ls
}
