package manpage

import (
	"bytes"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestEsc(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain", "plain"},
		{"--flag", `\-\-flag`},
		{`a\b`, `a\eb`},
		{".starts with a dot", `\&.starts with a dot`},
		{"'starts with a quote", `\&'starts with a quote`},
		{"mid.dot", "mid.dot"},
	}
	for _, tt := range tests {
		if got := esc(tt.in); got != tt.want {
			t.Errorf("esc(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWrite(t *testing.T) {
	root := &cobra.Command{Use: "tool", Short: "Do things"}
	var n int
	run := &cobra.Command{Use: "run [flags] -- PROG", Short: "Run PROG", Long: "Run PROG.\n\n.Second paragraph.", RunE: func(*cobra.Command, []string) error { return nil }}
	run.Flags().IntVarP(&n, "count", "c", 3, "how many `times`")
	run.Flags().Bool("hidden", false, "not shown")
	_ = run.Flags().MarkHidden("hidden")
	secret := &cobra.Command{Use: "secret", Hidden: true, RunE: run.RunE}
	group := &cobra.Command{Use: "group", Short: "A group"}
	group.AddCommand(&cobra.Command{Use: "leaf", Short: "A leaf", RunE: run.RunE})
	root.AddCommand(run, secret, group)

	var b bytes.Buffer
	if err := Write(&b, root, Page{Title: "TOOL", Section: "1", Source: "tool", Manual: "User Commands",
		Extra: []Section{{Heading: "Exit status", Text: "0 on success.", Items: []Item{{"ENV_VAR", "what it does"}}}}}); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{
		".TH \"TOOL\" 1 \"\" \"tool\" \"User Commands\"\n",
		".SH NAME\ntool \\- Do things\n",
		".B tool group leaf\n",
		".B tool run [flags] \\-\\- PROG\n",
		".SS \"tool run\"\nRun PROG.\n.PP\n\\&.Second paragraph.\n",
		".TP\n\\fB\\-c\\fR, \\fB\\-\\-count\\fR \\fItimes\\fR\nhow many times (default 3)\n",
		".SH \"EXIT STATUS\"\n0 on success.\n.TP\n\\fBENV_VAR\\fR\nwhat it does\n",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	for _, not := range []string{"secret", "hidden", ".B tool group\n", "\\-\\-help"} {
		if strings.Contains(page, not) {
			t.Errorf("page has %q:\n%s", not, page)
		}
	}
	var again bytes.Buffer
	_ = Write(&again, root, Page{Title: "TOOL", Section: "1", Source: "tool", Manual: "User Commands",
		Extra: []Section{{Heading: "Exit status", Text: "0 on success.", Items: []Item{{"ENV_VAR", "what it does"}}}}})
	if again.String() != page {
		t.Error("two renderings of one tree differ")
	}
}
