//go:build linux || darwin

package cli

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/confine-sandbox/confine/internal/manpage"
)

// manSections follow the commands on the manual page; the commands
// themselves come from the cobra definitions `confine help` prints.
var manSections = []manpage.Section{
	{Heading: "Exit status", Text: `The command's own status; 128+N when it died of signal N; 124 on timeout; 129 when --die-with-parent ended the run (the process that started confine exited); 125 when confine itself fails or refuses (bad flag, profile or environment, unusable work directory, refused capability, a guarantee this host cannot enforce, no acceptable backend, an explicitly configured event log that cannot be written); 126 when PROGRAM cannot be executed; 127 when it is not found.

With run --json, stdout is one JSON object: the result, or, when confine refused or failed before the command ran, {"error": {"kind", "message", "exit_status", "guarantees"}}, kind being one of unavailable, capability, invalid_spec, not_found, not_executable, launch or usage.`},
	{Heading: "Environment", Items: []manpage.Item{
		{Term: "CONFINE_EVENT_LOG", Text: `The event log, as --event-log ("off" disables). A log named here or by --event-log that cannot be written refuses the run.`},
		{Term: "XDG_STATE_HOME, HOME", Text: `The default event log is $XDG_STATE_HOME/confine/events.jsonl, else HOME/.local/state/confine/events.jsonl, HOME being $HOME or, when that is unset, the home directory the user database gives the user. When none is known or the file cannot be written, the run is not recorded and its result says why (event_log_skipped; on stderr with --verbose).`},
		{Term: "XDG_CONFIG_HOME", Text: `The capability key is $XDG_CONFIG_HOME/confine/cap.key, else ~/.config/confine/cap.key. A run whose writable roots hold confine's config or state directory, its event log or key file, or a server's socket directory is refused; read-only roots are granted around them.`},
	}},
}

// WriteManPage writes confine's manual page (section 1), generated from
// the command tree.
func WriteManPage(w io.Writer) error {
	root := newRoot(io.Discard, io.Discard)
	// cobra adds these when the tree is executed; the page lists them too.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	return manpage.Write(w, root, manpage.Page{
		Title: "CONFINE", Section: "1", Source: "confine", Manual: "User Commands",
		Extra: manSections,
	})
}

func newMan(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "man",
		Short: "Print confine's manual page (troff), generated from the definitions confine help prints",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return WriteManPage(stdout)
		},
	}
}
