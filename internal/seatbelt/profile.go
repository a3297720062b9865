// Package seatbelt is the macOS backend: the SBPL profile that
// /usr/bin/sandbox-exec applies to the command, the canonicalisation of
// every path it embeds, and (darwin builds only) the launch of the command
// under it. The profile generator and the canonicalisation are pure Go and
// are tested on every OS; only the launch needs a Mac.
//
// The profile keeps process services available ((allow default)), denies
// every network operation, every read and every write, then reopens reads
// of the system runtime, the toolchains, the work directory and the run's
// private scratch directory, and writes of the work directory, the scratch
// directory and the listed device nodes. Credential files under a granted
// root are denied again after the grants: in SBPL the last matching rule
// wins.
package seatbelt

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// ErrUnsafePath is returned for a path the generator refuses to embed:
// relative, not clean, or holding a control character or invalid UTF-8.
var ErrUnsafePath = errors.New("path cannot be embedded in a Seatbelt profile")

// Spec is what a run may touch. Every path must already be canonical (see
// Canon): SBPL's subpath and literal filters match the path the kernel
// resolved, so an unresolved /tmp/x would match nothing.
type Spec struct {
	// Worktree is the work directory: read and written.
	Worktree string
	// Scratch is the run's private 0700 directory (HOME and TMPDIR).
	Scratch string
	// ReadExec are read-only roots: the system runtime and toolchains.
	ReadExec []string
	// ReadWrite are further writable roots.
	ReadWrite []string
	// Devices are device nodes the command may read and write.
	Devices []string
	// Deny are credential paths under a granted root; they stay
	// unreadable and unwritable whatever the grants say.
	Deny []string
	// ReadOnly are paths inside the writable roots that stay readable but
	// not writable (the persistence guard's .git).
	ReadOnly []string
}

// Generate returns the SBPL profile for s. It fails, embedding nothing,
// when any path is unsafe.
func Generate(s Spec) (string, error) {
	if s.Worktree == "" || s.Scratch == "" {
		return "", fmt.Errorf("%w: a profile needs a work directory and a scratch directory", ErrUnsafePath)
	}
	all := [][]string{{s.Worktree, s.Scratch}, s.ReadExec, s.ReadWrite, s.Devices, s.Deny, s.ReadOnly}
	for _, ps := range all {
		for _, p := range ps {
			if err := CheckPath(p); err != nil {
				return "", err
			}
		}
	}
	read := sorted(append(append([]string{s.Worktree, s.Scratch}, s.ReadExec...), s.ReadWrite...))
	write := sorted(append([]string{s.Worktree, s.Scratch}, s.ReadWrite...))
	devices := sorted(s.Devices)

	var b strings.Builder
	b.WriteString("(version 1)\n")
	b.WriteString("(allow default)\n")
	b.WriteString("(deny network*)\n")
	b.WriteString("(deny file-read*)\n")
	b.WriteString("(deny file-write*)\n")
	// Programs stat the directories on the way to their roots (getcwd,
	// realpath); their metadata, not their contents, is reopened.
	rule(&b, "allow file-read-metadata", "literal", ancestors(append(append([]string(nil), read...), devices...)))
	rule(&b, "allow file-read*", "subpath", read)
	rule(&b, "allow file-read*", "literal", devices)
	rule(&b, "allow file-write*", "subpath", write)
	rule(&b, "allow file-write*", "literal", devices)
	rule(&b, "deny file-write*", "subpath", sorted(s.ReadOnly))
	rule(&b, "deny file-read* file-write*", "subpath", sorted(s.Deny))
	return b.String(), nil
}

// CheckPath says whether p can be embedded: absolute, clean, valid UTF-8
// and free of control characters (SBPL string escapes beyond \" and \\
// differ between macOS releases, so such a path is refused, never
// escaped).
func CheckPath(p string) error {
	switch {
	case !filepath.IsAbs(p) || !strings.HasPrefix(p, "/"):
		return fmt.Errorf("%w: %q is not absolute", ErrUnsafePath, p)
	case filepath.Clean(p) != p:
		return fmt.Errorf("%w: %q is not clean", ErrUnsafePath, p)
	case !utf8.ValidString(p):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrUnsafePath, p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %q holds a control character", ErrUnsafePath, p)
		}
	}
	return nil
}

// Quote returns p as an SBPL string literal: backslash and double quote
// escaped, nothing else changed.
func Quote(p string) string {
	var b strings.Builder
	b.Grow(len(p) + 2)
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		if c := p[i]; c == '"' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(p[i])
	}
	b.WriteByte('"')
	return b.String()
}

// rule writes one (ACTION (FILTER "path") ...) form; nothing for no paths,
// since an action without filters would apply to everything.
func rule(b *strings.Builder, action, filter string, paths []string) {
	if len(paths) == 0 {
		return
	}
	fmt.Fprintf(b, "(%s", action)
	for _, p := range paths {
		fmt.Fprintf(b, "\n  (%s %s)", filter, Quote(p))
	}
	b.WriteString(")\n")
}

// ancestors returns every proper ancestor directory of ps, "/" included.
func ancestors(ps []string) []string {
	var out []string
	for _, p := range ps {
		for d := filepath.Dir(p); ; d = filepath.Dir(d) {
			out = append(out, d)
			if d == "/" {
				break
			}
		}
	}
	return sorted(out)
}

func sorted(ps []string) []string {
	out := slices.Clone(ps)
	slices.Sort(out)
	return slices.Compact(out)
}
