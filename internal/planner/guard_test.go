//go:build unix

package planner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestGitGuard(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(base, "other")
	if err := os.MkdirAll(filepath.Join(other, "gitdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		make    func(w string) // lays out work tree w
		rw      func(w string) []string
		waive   bool
		want    func(w string) []string
		refused string // part of the refusal
	}{
		{name: "no .git", make: func(w string) {}},
		{name: "directory", make: func(w string) { must(t, os.Mkdir(w+"/.git", 0o755)) },
			want: func(w string) []string { return []string{w + "/.git"} }},
		{name: "waived", waive: true, make: func(w string) { must(t, os.Mkdir(w+"/.git", 0o755)) }},
		{name: "gitfile into the work tree", make: func(w string) {
			must(t, os.Mkdir(w+"/real", 0o755))
			must(t, os.WriteFile(w+"/.git", []byte("gitdir: real\n"), 0o644))
		}, want: func(w string) []string { return []string{w + "/.git", w + "/real"} }},
		{name: "gitfile outside every root", make: func(w string) {
			must(t, os.WriteFile(w+"/.git", []byte("gitdir: "+other+"/gitdir\n"), 0o644))
		}, want: func(w string) []string { return []string{w + "/.git"} }},
		{name: "gitfile into another writable root", make: func(w string) {
			must(t, os.WriteFile(w+"/.git", []byte("gitdir: "+other+"/gitdir\n"), 0o644))
		}, rw: func(w string) []string { return []string{w, other} }, refused: "inside writable root " + other},
		{name: "gitfile without gitdir", make: func(w string) { must(t, os.WriteFile(w+"/.git", []byte("hello\n"), 0o644)) },
			refused: "without a gitdir"},
		{name: "symlink", make: func(w string) { must(t, os.Symlink(other, w+"/.git")) }, refused: "is a symlink"},
		{name: "another writable root's .git", make: func(w string) {
			must(t, os.Mkdir(w+"/.git", 0o755))
			must(t, os.MkdirAll(other+"/repo/.git", 0o755))
		}, rw: func(w string) []string { return []string{w, other + "/repo"} },
			want: func(w string) []string { return []string{w + "/.git", other + "/repo/.git"} }},
		{name: "nested repository", make: func(w string) {
			must(t, os.MkdirAll(w+"/.git", 0o755))
			must(t, os.MkdirAll(w+"/vendor/lib/.git/hooks", 0o755))
			must(t, os.MkdirAll(w+"/a/b/c/.git", 0o755))
		}, want: func(w string) []string { return []string{w + "/.git", w + "/a/b/c/.git", w + "/vendor/lib/.git"} }},
		{name: "nested repository without a top-level one", make: func(w string) {
			must(t, os.MkdirAll(w+"/vendor/lib/.git", 0o755))
		}, want: func(w string) []string { return []string{w + "/vendor/lib/.git"} }},
		{name: "absorbed submodule", make: func(w string) {
			must(t, os.MkdirAll(w+"/.git/modules/sub", 0o755))
			must(t, os.MkdirAll(w+"/sub", 0o755))
			must(t, os.WriteFile(w+"/sub/.git", []byte("gitdir: ../.git/modules/sub\n"), 0o644))
		}, want: func(w string) []string { return []string{w + "/.git", w + "/sub/.git"} }},
		{name: "nested gitfile into the work tree", make: func(w string) {
			must(t, os.MkdirAll(w+"/gd/wt", 0o755))
			must(t, os.MkdirAll(w+"/sub", 0o755))
			must(t, os.WriteFile(w+"/sub/.git", []byte("gitdir: ../gd/wt\n"), 0o644))
		}, want: func(w string) []string { return []string{w + "/gd/wt", w + "/sub/.git"} }},
		{name: "nested gitfile into another writable root", make: func(w string) {
			must(t, os.MkdirAll(w+"/sub", 0o755))
			must(t, os.WriteFile(w+"/sub/.git", []byte("gitdir: "+other+"/gitdir\n"), 0o644))
		}, rw: func(w string) []string { return []string{w, other} }, refused: "inside writable root " + other},
		{name: "nested letter-case variant", make: func(w string) {
			must(t, os.MkdirAll(w+"/sub/.GIT", 0o755))
		}, want: func(w string) []string { return []string{w + "/sub/.GIT"} }},
		{name: "nested symlink", make: func(w string) {
			must(t, os.MkdirAll(w+"/sub", 0o755))
			must(t, os.Symlink(other, w+"/sub/.git"))
		}, refused: "is a symlink"},
		{name: "symlinked directory not followed", make: func(w string) {
			must(t, os.MkdirAll(other+"/linked/.git", 0o755))
			must(t, os.Symlink(other+"/linked", w+"/ln"))
		}},
		{name: "nested writable root walked once", make: func(w string) {
			must(t, os.MkdirAll(w+"/inner/x/.git", 0o755))
		}, rw: func(w string) []string { return []string{w, w + "/inner"} },
			want: func(w string) []string { return []string{w + "/inner/x/.git"} }},
		{name: "writable root inside .git", make: func(w string) { must(t, os.MkdirAll(w+"/.git/objects", 0o755)) },
			rw: func(w string) []string { return []string{w, w + "/.git/objects"} }, refused: "lies inside"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := filepath.Join(base, "w"+string(rune('a'+i)))
			must(t, os.Mkdir(w, 0o755))
			tt.make(w)
			rw := []string{w}
			if tt.rw != nil {
				rw = tt.rw(w)
			}
			var waive []string
			if tt.waive {
				waive = []string{spec.GGitPersistence}
			}
			got, err := GitGuard(rw, waive)
			if tt.refused != "" {
				if !errors.Is(err, spec.ErrUnavailable) || !errors.Is(err, ErrGuard) || !strings.Contains(err.Error(), tt.refused) ||
					!strings.Contains(err.Error(), "waive "+spec.GGitPersistence) {
					t.Fatalf("err = %v, want a guard refusal saying %q and how to waive it", err, tt.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			if tt.want != nil {
				want = tt.want(w)
			}
			if !slices.Equal(got, want) {
				t.Errorf("guarded = %q, want %q", got, want)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
