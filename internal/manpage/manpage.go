// Package manpage renders a cobra command tree as a troff manual page, so
// that `man confine` says what `confine help` says: the page is generated
// from the same definitions, never written by hand. (cobra's own doc
// package needs go-md2man, a module this project does not carry.)
package manpage

import (
	"bufio"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Page is what the command tree does not hold: the page's title, section
// and the sections that follow COMMANDS.
type Page struct {
	// Title is the page name, as in the .TH line ("CONFINE").
	Title string
	// Section is the manual section ("1").
	Section string
	// Source and Manual fill the .TH footer and header.
	Source, Manual string
	// Extra are further sections, in order, each a heading and plain
	// text (paragraphs separated by blank lines).
	Extra []Section
}

// Section is one section of the page: plain text, then tagged
// paragraphs (a term and its text, as flags are shown).
type Section struct {
	Heading string
	Text    string
	Items   []Item
}

// Item is one tagged paragraph.
type Item struct {
	Term, Text string
}

// Write renders root and every visible command beneath it. The output
// depends only on the tree and p (no date, no version), so a committed
// page can be compared with a fresh one.
func Write(w io.Writer, root *cobra.Command, p Page) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, ".TH %s %s \"\" %s %s\n", quote(p.Title), p.Section, quote(p.Source), quote(p.Manual))
	fmt.Fprintf(bw, ".SH NAME\n%s \\- %s\n", esc(root.Name()), esc(root.Short))
	cmds := visible(root)
	bw.WriteString(".SH SYNOPSIS\n")
	first := true
	for _, c := range cmds {
		if !c.Runnable() {
			continue
		}
		if !first {
			bw.WriteString(".br\n")
		}
		first = false
		fmt.Fprintf(bw, ".B %s\n", esc(useLine(c)))
	}
	bw.WriteString(".SH DESCRIPTION\n")
	paragraphs(bw, firstNonEmpty(root.Long, root.Short))
	bw.WriteString(".SH COMMANDS\n")
	for _, c := range cmds {
		if c == root {
			continue
		}
		fmt.Fprintf(bw, ".SS %s\n", quote(c.CommandPath()))
		paragraphs(bw, firstNonEmpty(c.Long, c.Short))
		flags(bw, c.NonInheritedFlags())
	}
	for _, s := range p.Extra {
		fmt.Fprintf(bw, ".SH %s\n", quote(strings.ToUpper(s.Heading)))
		paragraphs(bw, s.Text)
		for _, it := range s.Items {
			fmt.Fprintf(bw, ".TP\n\\fB%s\\fR\n", esc(it.Term))
			paragraphs(bw, it.Text)
		}
	}
	return bw.Flush()
}

// visible returns root and its visible descendants, depth first in
// cobra's (sorted) order.
func visible(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if !c.IsAvailableCommand() && c.Name() != "help" {
			continue
		}
		out = append(out, visible(c)...)
	}
	return out
}

// useLine is the command's synopsis: its path and its Use line's
// arguments, and [flags] when it has any.
func useLine(c *cobra.Command) string {
	_, args, _ := strings.Cut(c.Use, " ")
	line := c.CommandPath()
	if c.HasAvailableFlags() && !strings.Contains(args, "[flags]") {
		line += " [flags]"
	}
	if args != "" {
		line += " " + args
	}
	return line
}

func flags(w *bufio.Writer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden || f.Name == "help" {
			return
		}
		name := `\fB\-\-` + esc(f.Name) + `\fR`
		if f.Shorthand != "" {
			name = `\fB\-` + esc(f.Shorthand) + `\fR, ` + name
		}
		varname, usage := pflag.UnquoteUsage(f)
		if varname != "" {
			name += ` \fI` + esc(varname) + `\fR`
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, ".TP\n%s\n%s\n", name, esc(usage))
	})
}

// paragraphs writes text, blank lines separating paragraphs and lines
// kept as they are (.nf would lose the page's justification; .br keeps
// the author's line breaks where they carry structure).
func paragraphs(w *bufio.Writer, text string) {
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			w.WriteString(".PP\n")
		}
		for _, line := range strings.Split(para, "\n") {
			w.WriteString(esc(strings.TrimRight(line, " ")))
			w.WriteByte('\n')
		}
	}
}

// esc makes s safe as troff text: a backslash is \e, a hyphen \- (so
// that it is not hyphenated and copies as an ASCII minus), and a line
// starting with a control character is protected by \&.
func esc(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

func quote(s string) string {
	return `"` + strings.ReplaceAll(esc(s), `"`, `\(dq`) + `"`
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
