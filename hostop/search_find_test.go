//go:build linux

package hostop

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestFindAgreesWithRegexp: the literal fast path and the rare-byte
// prefilter find exactly what the regexp finds, at every start offset.
func TestFindAgreesWithRegexp(t *testing.T) {
	texts := []string{
		"",
		"needle",
		"xneedlex needle",
		"line 17 of file 9: func Foo17() { return }\nline 18: func Foo17( again\n",
		"ne-edle-4242 needle-424 needle-4242",
		strings.Repeat("nnnnnneedl", 50) + "needle-4242",
		"a\nb\nc",
		"(((()))(",
	}
	pats := []string{"needle", "needle-4242", `func Foo17\(`, "e", `\(`, "a\nb", "zzz", `need[a-z]e`, `(?i)NEEDLE`, `^line`, "nn"}
	for _, p := range pats {
		re := regexp.MustCompile(p)
		s := &searcher{re: re, need: -1}
		if prefix, complete := re.LiteralPrefix(); prefix != "" {
			s.need = int(rarestByte(prefix))
			if complete {
				s.lit = prefix
			}
		}
		for _, text := range texts {
			for start := 0; start <= len(text); start++ {
				data := []byte(text[start:])
				got, want := s.find(data), re.FindIndex(data)
				if !slices.Equal(got, want) {
					t.Errorf("%q in %q[%d:]: find %v, regexp %v", p, text, start, got, want)
				}
				if want != nil && s.need >= 0 && strings.IndexByte(text[start:], byte(s.need)) < 0 {
					t.Errorf("%q in %q[%d:]: matches without the byte %q the prefilter needs", p, text, start, byte(s.need))
				}
			}
		}
	}
}

func TestRarestByte(t *testing.T) {
	for _, tt := range []struct {
		lit  string
		want byte
	}{
		{"needle-4242", '-'},
		{"e", 'e'},
		{"func Foo17(", '7'},
		{"ab@c", '@'},
		{"\xff", '\xff'},
	} {
		if got := rarestByte(tt.lit); got != tt.want {
			t.Errorf("rarestByte(%q) = %q, want %q", tt.lit, got, tt.want)
		}
	}
}

// TestSearchPipelineAgrees: the pipelined walk (several workers, batches
// merged in walk order) gives what one worker gives, bounds included, on
// a tree of nested directories with some files skipped.
func TestSearchPipelineAgrees(t *testing.T) {
	f := newFixture(t)
	for d := range 12 {
		dir := filepath.Join(f.root, "sub", fmt.Sprintf("d%02d", d), fmt.Sprintf("e%d", d%3))
		must(t, os.MkdirAll(dir, 0o755))
		for i := range 40 + d*7 {
			body := fmt.Sprintf("x %d %d\nhit %d\nmiss\nhit again\n", d, i, i)
			if i%13 == 0 {
				body = "hit\x00binary"
			}
			must(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), []byte(body), 0o644))
		}
		must(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "top"), []byte("hit top\n"), 0o644))
	}
	rp, _ := f.r.ReadPath("sub")
	search := func(procs int, pat string, o SearchOptions) SearchResult {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		res, err := Search(context.Background(), rp, regexp.MustCompile(pat), o)
		must(t, err)
		return res
	}
	for _, pat := range []string{"hit", "hit again", `hit \d+`, "nothing"} {
		for _, o := range []SearchOptions{{}, {MaxMatches: 1}, {MaxMatches: 77}, {MaxFiles: 5}, {MaxFiles: 333}, {MaxMatches: 1000000}} {
			want := search(1, pat, o)
			for _, procs := range []int{2, 4} {
				if got := search(procs, pat, o); !reflect.DeepEqual(got, want) {
					t.Errorf("%q %+v, %d workers: %d matches, %d files, truncated %v; one worker: %d, %d, %v",
						pat, o, procs, len(got.Matches), got.Files, got.Truncated, len(want.Matches), want.Files, want.Truncated)
				}
			}
		}
	}
}

// TestSearchPipelineDescriptors: a tree of many one-file directories
// searched with few descriptors to spare: the queue holds a descriptor
// per directory, and must not hold so many that a directory is skipped.
func TestSearchPipelineDescriptors(t *testing.T) {
	f := newFixture(t)
	for d := range 300 {
		dir := filepath.Join(f.root, "sub", fmt.Sprintf("d%03d", d))
		must(t, os.MkdirAll(dir, 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("hit\n"), 0o644))
	}
	var lim unix.Rlimit
	must(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &lim))
	low := lim
	low.Cur = 128
	must(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	defer unix.Setrlimit(unix.RLIMIT_NOFILE, &lim)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	rp, _ := f.r.ReadPath("sub")
	res, err := Search(context.Background(), rp, regexp.MustCompile("hit"), SearchOptions{})
	must(t, err)
	if len(res.Matches) != 300 || res.Files != 301 || res.Special != 0 { // the fixture has one file of its own in sub
		t.Errorf("%d matches in %d files, %d skipped as special; want 300, 301, 0", len(res.Matches), res.Files, res.Special)
	}
}
