package seatbelt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sexp is a parsed SBPL form: an atom, a string literal, or a list.
type sexp struct {
	atom   string
	str    *string
	list   []sexp
	isList bool
}

// parseSBPL reads every top-level form of src with SBPL's lexical rules
// for what the generator emits: lists, atoms, and strings in which a
// backslash escapes the next character. It fails on anything else (an
// unterminated string, an unbalanced parenthesis, a stray character).
func parseSBPL(src string) ([]sexp, error) {
	var forms []sexp
	var stack [][]sexp
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t':
			i++
		case c == ';':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(':
			stack = append(stack, nil)
			i++
		case c == ')':
			if len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced ) at %d", i)
			}
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			f := sexp{list: top, isList: true}
			if len(stack) == 0 {
				forms = append(forms, f)
			} else {
				stack[len(stack)-1] = append(stack[len(stack)-1], f)
			}
			i++
		case c == '"':
			var b strings.Builder
			i++
			for {
				if i >= len(src) {
					return nil, errors.New("unterminated string")
				}
				if src[i] == '\\' {
					if i+1 >= len(src) {
						return nil, errors.New("dangling backslash")
					}
					b.WriteByte(src[i+1])
					i += 2
					continue
				}
				if src[i] == '"' {
					i++
					break
				}
				b.WriteByte(src[i])
				i++
			}
			s := b.String()
			if len(stack) == 0 {
				return nil, errors.New("string outside a form")
			}
			stack[len(stack)-1] = append(stack[len(stack)-1], sexp{str: &s})
		default:
			j := i
			for j < len(src) && !strings.ContainsRune(" \n\t()\";", rune(src[j])) {
				j++
			}
			if len(stack) == 0 {
				return nil, fmt.Errorf("atom outside a form at %d", i)
			}
			stack[len(stack)-1] = append(stack[len(stack)-1], sexp{atom: src[i:j]})
			i = j
		}
	}
	if len(stack) != 0 {
		return nil, errors.New("unbalanced (")
	}
	return forms, nil
}

// shape describes a form by its atoms, with every string replaced by
// "S": two profiles of the same shape have the same rules.
func shape(f sexp) string {
	switch {
	case f.str != nil:
		return "S"
	case !f.isList:
		return f.atom
	}
	parts := make([]string, len(f.list))
	for i, e := range f.list {
		parts[i] = shape(e)
	}
	return "(" + strings.Join(parts, " ") + ")"
}

// stringsOf lists every string literal in forms, decoded.
func stringsOf(forms []sexp) []string {
	var out []string
	var walk func(sexp)
	walk = func(f sexp) {
		if f.str != nil {
			out = append(out, *f.str)
		}
		for _, e := range f.list {
			walk(e)
		}
	}
	for _, f := range forms {
		walk(f)
	}
	return out
}

var goldenSpecs = []struct {
	name string
	spec Spec
}{
	{"minimal", Spec{Worktree: "/Users/dev/src/app", Scratch: "/private/var/folders/x1/abc/T/confine-1"}},
	{"system", Spec{Worktree: "/Users/dev/src/app", Scratch: "/private/var/folders/x1/abc/T/confine-1",
		ReadExec: SystemReadExec(), Devices: Devices()}},
	{"rust-toolchain", Spec{Worktree: "/Users/dev/src/app", Scratch: "/private/var/folders/x1/abc/T/confine-1",
		ReadExec:  append(SystemReadExec(), "/Users/dev/.cargo", "/Users/dev/.rustup"),
		ReadWrite: []string{"/Users/dev/cache"},
		Devices:   Devices(),
		Deny:      Canon{Eval: func(p string) (string, error) { return "", os.ErrNotExist }}.CredentialDenies("/Users/dev/.cargo")}},
	{"awkward-names", Spec{Worktree: `/Users/dev/a "quoted" dir`, Scratch: `/private/tmp/back\slash`,
		ReadExec: []string{"/Volumes/Ext ernal/é", `/opt/")(allow file-write* (subpath "/")`}}},
}

// TestGolden compares the generated profiles for representative specs
// with testdata/*.sb (CONFINE_UPDATE_GOLDEN=1 rewrites them).
func TestGolden(t *testing.T) {
	for _, tc := range goldenSpecs {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Generate(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".sb")
			if os.Getenv("CONFINE_UPDATE_GOLDEN") == "1" {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("profile differs from %s:\n%s", path, got)
			}
			forms, err := parseSBPL(got)
			if err != nil {
				t.Fatal(err)
			}
			checkProfile(t, tc.spec, forms)
		})
	}
}

// checkProfile asserts the profile's rules: the fixed prologue, then only
// the allow and deny forms the generator emits, each with filters on
// strings that are exactly the spec's paths or their ancestors.
func checkProfile(t *testing.T, s Spec, forms []sexp) {
	t.Helper()
	prologue := []string{"(version 1)", "(allow default)", "(deny network*)", "(deny file-read*)", "(deny file-write*)"}
	if len(forms) < len(prologue) {
		t.Fatalf("%d forms, want at least the prologue", len(forms))
	}
	for i, p := range prologue {
		if got := shape(forms[i]); got != p {
			t.Fatalf("form %d = %s, want %s", i, got, p)
		}
	}
	allowed := map[string][]string{
		"allow file-read-metadata":    {"literal"},
		"allow file-read*":            {"subpath", "literal"},
		"allow file-write*":           {"subpath", "literal"},
		"deny file-read* file-write*": {"subpath"},
	}
	paths := slices.Concat([]string{s.Worktree, s.Scratch}, s.ReadExec, s.ReadWrite, s.Devices, s.Deny)
	known := slices.Concat(paths, ancestors(paths))
	for _, f := range forms[len(prologue):] {
		var head []string
		var filters []sexp
		for _, e := range f.list {
			if e.isList {
				filters = append(filters, e)
			} else {
				head = append(head, e.atom)
			}
		}
		kinds, ok := allowed[strings.Join(head, " ")]
		if !ok || len(filters) == 0 {
			t.Fatalf("unexpected form %s", shape(f))
		}
		for _, fl := range filters {
			if len(fl.list) != 2 || !slices.Contains(kinds, fl.list[0].atom) || fl.list[1].str == nil {
				t.Fatalf("unexpected filter %s in %s", shape(fl), strings.Join(head, " "))
			}
			if p := *fl.list[1].str; !slices.Contains(known, p) {
				t.Fatalf("filter on %q, which the spec does not name", p)
			}
		}
	}
	for _, p := range paths {
		if !slices.Contains(stringsOf(forms), p) {
			t.Errorf("path %q missing from the profile", p)
		}
	}
}

// TestDenyAfterGrants: SBPL's last matching rule wins, so the credential
// denies must follow every allow.
func TestDenyAfterGrants(t *testing.T) {
	p, err := Generate(goldenSpecs[2].spec)
	if err != nil {
		t.Fatal(err)
	}
	deny := strings.Index(p, "(deny file-read* file-write*")
	if deny < 0 || strings.LastIndex(p, "(allow ") > deny {
		t.Fatalf("credential denies do not come last:\n%s", p)
	}
	if !strings.Contains(p, `(subpath "/Users/dev/.cargo/credentials.toml")`) || !strings.Contains(p, `(subpath "/Users/dev/.cargo/.ssh")`) {
		t.Fatalf("cargo home's credentials not denied:\n%s", p)
	}
}

// TestReadOnlyAfterGrants: the persistence guard's .git is denied writes
// after the work tree's grant (the last matching rule wins).
func TestReadOnlyAfterGrants(t *testing.T) {
	s := goldenSpecs[0].spec
	s.ReadOnly = []string{s.Worktree + "/.git"}
	p, err := Generate(s)
	if err != nil {
		t.Fatal(err)
	}
	deny := strings.Index(p, "(subpath "+Quote(s.Worktree+"/.git")+")")
	if deny < 0 || strings.LastIndex(p[:deny], "(allow ") > strings.LastIndex(p[:deny], "(deny file-write*\n") {
		t.Fatalf(".git is not denied writes after every grant:\n%s", p)
	}
	s.ReadOnly = []string{"relative/.git"}
	if _, err := Generate(s); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("a relative read-only path: err = %v, want ErrUnsafePath", err)
	}
}

func TestRefusesUnsafePaths(t *testing.T) {
	base := Spec{Worktree: "/w", Scratch: "/s"}
	for _, bad := range []string{"", "rel/path", "/a/../b", "/a//b", "/a/", "/a\nb", "/a\x00b", "/a\x7fb", "/a\rb", "/\xff\xfe"} {
		for _, set := range []func(*Spec){
			func(s *Spec) { s.Worktree = bad },
			func(s *Spec) { s.Scratch = bad },
			func(s *Spec) { s.ReadExec = []string{bad} },
			func(s *Spec) { s.ReadWrite = []string{bad} },
			func(s *Spec) { s.Devices = []string{bad} },
			func(s *Spec) { s.Deny = []string{bad} },
		} {
			s := base
			set(&s)
			if p, err := Generate(s); !errors.Is(err, ErrUnsafePath) {
				t.Errorf("Generate with %q = %v, %q; want ErrUnsafePath", bad, err, p)
			}
		}
	}
}

func TestQuote(t *testing.T) {
	for in, want := range map[string]string{
		`/a`:       `"/a"`,
		`/a"b`:     `"/a\"b"`,
		`/a\b`:     `"/a\\b"`,
		`/\"`:      `"/\\\""`,
		`/é (x) ;`: `"/é (x) ;"`,
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzGenerate: whatever path a caller supplies, in any field, the profile
// parses to the same rules as one built from a plain path, and every
// string in it decodes to a path the spec named (or an ancestor): no path
// can end a string literal early or add a rule.
func FuzzGenerate(f *testing.F) {
	for _, s := range []string{"/a", `/a"b`, `/a\`, `/a\"`, `/")(allow default)(deny`, "/x;comment", "/é", `/\\\"`, "/a b"} {
		f.Add(s, uint8(0))
	}
	f.Fuzz(func(t *testing.T, p string, field uint8) {
		plain := Spec{Worktree: "/w", Scratch: "/s", ReadExec: []string{"/r"}, ReadWrite: []string{"/rw"}, Devices: []string{"/dev/null"}, Deny: []string{"/r/.ssh"}}
		s := plain
		s.ReadExec = slices.Clone(plain.ReadExec)
		switch field % 6 {
		case 0:
			s.Worktree = p
		case 1:
			s.Scratch = p
		case 2:
			s.ReadExec = append(s.ReadExec, p)
		case 3:
			s.ReadWrite = []string{p}
		case 4:
			s.Devices = []string{p}
		case 5:
			s.Deny = []string{p}
		}
		got, err := Generate(s)
		if err != nil {
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		forms, err := parseSBPL(got)
		if err != nil {
			t.Fatalf("profile for %q does not parse: %v\n%s", p, err, got)
		}
		ref, _ := Generate(plain)
		refForms, _ := parseSBPL(ref)
		if len(forms) != len(refForms) {
			t.Fatalf("path %q changed the number of forms: %d, want %d\n%s", p, len(forms), len(refForms), got)
		}
		for i := range forms {
			if a, b := heads(forms[i]), heads(refForms[i]); a != b {
				t.Fatalf("path %q changed form %d: %s, want %s", p, i, a, b)
			}
		}
		checkProfile(t, s, forms)
	})
}

// heads is a form's atoms and its filters' kinds, without the strings or
// their number.
func heads(f sexp) string {
	var out []string
	kinds := map[string]bool{}
	for _, e := range f.list {
		if e.isList && len(e.list) > 0 {
			kinds[e.list[0].atom] = true
		} else if !e.isList {
			out = append(out, e.atom)
		}
	}
	for k := range kinds {
		out = append(out, "("+k+")")
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}
