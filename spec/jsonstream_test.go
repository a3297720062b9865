package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// legacyMarshal is Stream.MarshalJSON as it was before it streamed: the
// reference the --json output must keep matching byte for byte.
// With json_api 4, bytes that are not UTF-8 are given in base64 too.
func legacyMarshal(s Stream) ([]byte, error) {
	exact := func(b []byte) []byte {
		if utf8.Valid(b) {
			return nil
		}
		return b
	}
	return json.Marshal(struct {
		Head       string `json:"head"`
		HeadBase64 []byte `json:"head_base64,omitempty"`
		Tail       string `json:"tail,omitempty"`
		TailBase64 []byte `json:"tail_base64,omitempty"`
		Total      int64  `json:"total_bytes"`
		Truncated  bool   `json:"truncated"`
	}{string(s.Head), exact(s.Head), string(s.Tail), exact(s.Tail), s.Total, s.Truncated})
}

// encoderJSON is what the CLI printed before WriteJSON.
func encoderJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// tricky are byte strings at the edges of JSON string escaping.
var tricky = []string{
	"", "plain", "\x00", "\x00\x01\x1f\x7f", "\b\f\n\r\t", `"\`, "<a href='x'>&amp;</a>",
	"héllo wörld ✓ 😀", "\u2028\u2029", "\xe2\x80", "\xe2\x80\xa8x", "\xed\xa0\x80", "\xff\xfe",
	"\xf0\x9f\x98", "ok\xc3", "\xc3\x28", "\xf4\x90\x80\x80", "\xef\xbf\xbd", strings.Repeat("\x00", 1000),
}

func randomBytes(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	alphabet := []byte("aZ09 <>&\"\\\x00\x1f\x7f\n\xe2\x80\xa8\xa9\xc3\xa9\xf0\x9f\x98\x80\xff")
	for i := range b {
		if rng.IntN(4) == 0 {
			b[i] = byte(rng.IntN(256))
		} else {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
	}
	return b
}

func checkStream(t *testing.T, s Stream) {
	t.Helper()
	want, err := legacyMarshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("MarshalJSON(%q, %q):\n got %s\nwant %s", s.Head, s.Tail, got, want)
	}
	// The kept bytes come back exactly, UTF-8 or not.
	var back Stream
	if err := json.Unmarshal(got, &back); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.Head, s.Head) || !bytes.Equal(back.Tail, s.Tail) {
		t.Fatalf("MarshalJSON(%q, %q) reads back as (%q, %q)", s.Head, s.Tail, back.Head, back.Tail)
	}
}

func TestStreamJSONMatchesLegacy(t *testing.T) {
	for _, h := range tricky {
		for _, tl := range tricky {
			checkStream(t, Stream{Head: []byte(h), Tail: []byte(tl), Total: int64(len(h) + len(tl) + 3), Truncated: tl != ""})
		}
	}
	checkStream(t, Stream{})
	checkStream(t, Stream{Head: []byte{}, Total: -1})
	rng := rand.New(rand.NewPCG(3, 4))
	for range 3000 {
		checkStream(t, Stream{Head: randomBytes(rng, rng.IntN(40)), Tail: randomBytes(rng, rng.IntN(40)), Total: rng.Int64()})
	}
}

func FuzzStreamJSON(f *testing.F) {
	for _, s := range tricky {
		f.Add([]byte(s), []byte(s+"x"))
	}
	f.Fuzz(func(t *testing.T, head, tail []byte) {
		checkStream(t, Stream{Head: head, Tail: tail, Total: int64(len(head)), Truncated: len(tail) > 0})
	})
}

func TestCommandResultWriteJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	results := []CommandResult{
		{},
		{
			RunID: "r<1>&", ExitCode: -1, Signal: 9,
			Stdout:   Stream{Head: []byte("out\x00<b>"), Tail: []byte("\xff\u2028end"), Total: 1 << 40, Truncated: true},
			Stderr:   Stream{Head: []byte("err & warn\n")},
			Duration: 1500 * time.Millisecond, TimedOut: true, Cancelled: true, Killed: true, Survivors: 3,
			Usage:           Usage{UserCPU: 1, SysCPU: 2, MaxRSSKB: 3},
			Backend:         "landlock+namespaces",
			SkippedBackends: []SkippedBackend{{Name: "bwrap", Reason: "not <implemented> & \"never\""}},
			Layers:          []string{"landlock", "seccomp"},
			Guarantees:      []Guarantee{{Name: "no-network", Mechanism: "seccomp"}, {Name: "x", Waived: true}},
			PathOmitted:     []string{"/a\u2028b"}, HiddenCredentials: []string{"/home/u/.netrc"},
			Denials:     []Denial{{Syscall: "chmod", Path: "/etc/<x>", Errno: "EACCES", Reason: "outside"}},
			Persistence: []Persistence{{Path: ".git/hooks/pre-commit", Kind: "created", What: "git hooks"}},
		},
	}
	for range 200 {
		r := CommandResult{
			RunID:    string(randomBytes(rng, 8)),
			ExitCode: rng.IntN(3), Signal: rng.IntN(2) * 15,
			Stdout: Stream{Head: randomBytes(rng, rng.IntN(100)), Tail: randomBytes(rng, rng.IntN(2)*rng.IntN(50)), Total: rng.Int64N(1000)},
			Stderr: Stream{Head: randomBytes(rng, rng.IntN(20))},
			Killed: rng.IntN(2) == 0, Survivors: rng.IntN(2),
			Layers: []string{string(randomBytes(rng, 5))},
		}
		if rng.IntN(2) == 0 {
			r.Denials = []Denial{{Syscall: string(randomBytes(rng, 4)), Reason: "<&>"}}
		}
		results = append(results, r)
	}
	for i, r := range results {
		want := encoderJSON(t, r)
		var got bytes.Buffer
		if err := r.WriteJSON(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("result %d:\n got %s\nwant %s", i, got.Bytes(), want)
		}
		var back CommandResult
		if err := json.Unmarshal(got.Bytes(), &back); err != nil {
			t.Fatalf("result %d: %v", i, err)
		}
	}
}

// TestWriteJSONFieldsMirrored: every field of CommandResult is one the
// streaming writer handles itself, not through the fallback.
func TestWriteJSONFieldsMirrored(t *testing.T) {
	var r CommandResult
	if _, ok := fieldsOf(reflectTypeOf(&r)); !ok {
		t.Fatal("CommandResult uses a struct feature WriteJSON does not mirror; it falls back to buffering the whole document")
	}
}

// TestWriteJSONFallback: a struct with features the writer does not mirror
// is still encoded exactly.
func TestWriteJSONFallback(t *testing.T) {
	type inner struct{ A int }
	type odd struct {
		inner
		N int    `json:"n,string"`
		S Stream `json:"s"`
	}
	v := odd{inner{1}, 2, Stream{Head: []byte("<\x00>")}}
	var b bytes.Buffer
	w := newBufWriter(&b)
	if err := writeStruct(w, reflectValueOf(&v)); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	want := bytes.TrimSuffix(encoderJSON(t, v), []byte("\n"))
	if !bytes.Equal(b.Bytes(), want) {
		t.Fatalf("got %s want %s", b.Bytes(), want)
	}
}

// BenchmarkWriteJSON: a 1 MiB capture of NUL bytes, as in an output flood.
func BenchmarkWriteJSON(b *testing.B) {
	r := CommandResult{Stdout: Stream{Head: make([]byte, 512<<10), Tail: make([]byte, 512<<10), Total: 1 << 30, Truncated: true}}
	b.ReportAllocs()
	for b.Loop() {
		if err := r.WriteJSON(discard{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncoderJSON is the encoding/json baseline for BenchmarkWriteJSON.
func BenchmarkEncoderJSON(b *testing.B) {
	r := CommandResult{Stdout: Stream{Head: make([]byte, 512<<10), Tail: make([]byte, 512<<10), Total: 1 << 30, Truncated: true}}
	b.ReportAllocs()
	for b.Loop() {
		enc := json.NewEncoder(discard{})
		enc.SetEscapeHTML(false)
		if err := enc.Encode(r); err != nil {
			b.Fatal(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

func reflectTypeOf(p *CommandResult) reflect.Type { return reflect.TypeOf(p).Elem() }
func reflectValueOf(p any) reflect.Value          { return reflect.ValueOf(p).Elem() }
func newBufWriter(w io.Writer) *bufio.Writer      { return bufio.NewWriter(w) }
