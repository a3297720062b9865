//go:build unix

package eventlog

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/confine-sandbox/confine/internal/esc"
)

// labelWidth aligns Format's values; it fits the longest label.
const labelWidth = len("stdout truncated") + 2

// Format writes e for a human: one field per line ("label  value"), then
// the skipped backends, the limits, and the guarantees as a table of
// "name  mechanism" or "name  WAIVED". Strings that hold control
// characters or invalid UTF-8 are printed Go-quoted, so a recorded argv
// cannot drive the reader's terminal. Write errors are left to w's owner.
func Format(w io.Writer, e Event) {
	p := func(label, value string) {
		fmt.Fprintf(w, "%-*s%s\n", labelWidth, label, value)
	}
	p("run", esc.Text(e.RunID))
	p("time", e.Time.Format("2006-01-02T15:04:05.000Z07:00"))
	p("scope", orDash(esc.Text(e.Scope)))
	p("capability", orDash(esc.Text(e.CapabilityID)))
	p("profile", orDash(esc.Text(e.Profile)))
	p("tier", strconv.Itoa(e.Tier))
	p("backend", orDash(esc.Text(e.Backend)))
	abi := "none"
	if e.LandlockABI > 0 {
		abi = strconv.Itoa(e.LandlockABI)
	}
	p("landlock abi", abi)
	p("layers", orDash(esc.Join(e.Layers, ", ")))
	p("argv", orDash(shellJoin(e.Argv)))
	p("dir", orDash(esc.Text(e.Dir)))
	p("env names", orDash(esc.Join(e.EnvNames, " ")))
	if e.Error != "" {
		p("error", esc.Text(e.Error))
	}
	p("exit code", strconv.Itoa(e.ExitCode))
	p("signal", signalString(e.Signal))
	p("duration", time.Duration(e.DurationNS).String())
	p("timed out", yesNo(e.TimedOut))
	p("cancelled", yesNo(e.Cancelled))
	p("killed", yesNo(e.Killed))
	p("survivors", strconv.Itoa(e.Survivors))
	p("stdout bytes", strconv.FormatInt(e.StdoutBytes, 10))
	p("stdout truncated", yesNo(e.StdoutTruncated))
	p("stderr bytes", strconv.FormatInt(e.StderrBytes, 10))
	p("stderr truncated", yesNo(e.StderrTruncated))
	p("denials", strconv.Itoa(e.Denials))
	for _, c := range e.Persistence {
		p("persistence", esc.Text(c.Kind+" "+c.Path+" ("+c.What+")"))
	}

	if len(e.SkippedBackends) > 0 {
		fmt.Fprintln(w, "skipped backends")
		rows := make([][2]string, len(e.SkippedBackends))
		for i, s := range e.SkippedBackends {
			rows[i] = [2]string{esc.Text(s.Name), esc.Text(s.Reason)}
		}
		table(w, rows)
	}

	l := e.Limits
	fmt.Fprintln(w, "limits")
	table(w, [][2]string{
		{"wall time", l.WallTime.String()},
		{"cpu time", l.CPUTime.String()},
		{"memory", sizeString(l.MemoryBytes)},
		{"max procs", strconv.FormatInt(l.MaxProcs, 10)},
		{"file size", sizeString(l.FileSizeBytes)},
		{"open files", strconv.FormatInt(l.OpenFiles, 10)},
		{"output", sizeString(l.OutputBytes)},
		{"kill grace", l.KillGrace.String()},
	})

	fmt.Fprintln(w, "guarantees")
	rows := make([][2]string, len(e.Guarantees))
	for i, g := range e.Guarantees {
		how := esc.Text(g.Mechanism)
		switch {
		case g.Waived:
			how = "WAIVED"
		case how == "":
			how = "-"
		}
		rows[i] = [2]string{esc.Text(g.Name), how}
	}
	table(w, rows)
	formatConnections(w, e)
}

// table writes rows indented by two spaces, the first column padded to
// its widest cell plus two spaces.
func table(w io.Writer, rows [][2]string) {
	width := 0
	for _, r := range rows {
		width = max(width, utf8.RuneCountInString(r[0]))
	}
	for _, r := range rows {
		pad := width - utf8.RuneCountInString(r[0]) + 2
		fmt.Fprintf(w, "  %s%s%s\n", r[0], strings.Repeat(" ", pad), r[1])
	}
}

// shellJoin renders argv as a shell would read it back: plain words bare,
// other printable words single-quoted, anything else Go-quoted.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		switch {
		case a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-") == "":
			out[i] = a
		case esc.Printable(a):
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		default:
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}

func signalString(n int) string {
	if n == 0 {
		return "0"
	}
	if name := unix.SignalName(syscall.Signal(n)); name != "" {
		return fmt.Sprintf("%d (%s)", n, name)
	}
	return strconv.Itoa(n)
}

// sizeString prints a byte count in the largest binary unit that divides
// it exactly ("8GiB", "1MiB", "1000").
func sizeString(n int64) string {
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
