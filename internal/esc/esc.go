// Package esc makes text that a confined command controls safe to print
// in confine's own output (its stderr, inspect, the log's text form):
// host names, paths, program names, task ids, error messages that quote
// them. It is the one escaping function; every such sink calls Text.
package esc

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Text returns s as is when it is valid UTF-8 of printable characters
// only (unicode.IsPrint: no control characters, so no ESC, BEL, CR or
// newline), and Go-quoted (strconv.Quote) otherwise: a command cannot
// start a line of its own, move the cursor or recolour the terminal
// through it.
func Text(s string) string {
	if Printable(s) {
		return s
	}
	return strconv.Quote(s)
}

// Printable says whether Text leaves s as is.
func Printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// Join is the elements, each through Text, joined by sep.
func Join(ss []string, sep string) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = Text(s)
	}
	return strings.Join(out, sep)
}
