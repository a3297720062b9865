package capture

import (
	"bytes"
	"strings"
	"testing"
)

func TestBuffer(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		writes    []string
		head      string
		tail      string
		truncated bool
	}{
		{"empty", 10, nil, "", "", false},
		{"fits", 10, []string{"abc", "def"}, "abcdef", "", false},
		{"exact", 10, []string{"0123456789"}, "0123456789", "", false},
		{"one over", 10, []string{"0123456789X"}, "01234", "6789X", true},
		{"many small", 6, []string{"a", "b", "c", "d", "e", "f", "g", "h"}, "abc", "fgh", true},
		{"big tail write", 4, []string{"ab", strings.Repeat("x", 100) + "yz"}, "ab", "yz", true},
		{"wrapping ring", 8, []string{"head", "1", "22", "333", "4444"}, "head", "4444", true},
		{"zero limit", 0, []string{"abc"}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New(tt.limit, nil, 0)
			var total int64
			for _, w := range tt.writes {
				n, err := b.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
				total += int64(n)
			}
			s := b.Stream()
			if string(s.Head) != tt.head || string(s.Tail) != tt.tail || s.Truncated != tt.truncated || s.Total != total {
				t.Fatalf("got head %q tail %q truncated %v total %d; want %q %q %v %d",
					s.Head, s.Tail, s.Truncated, s.Total, tt.head, tt.tail, tt.truncated, total)
			}
		})
	}
}

func TestLiveLimit(t *testing.T) {
	var live bytes.Buffer
	b := New(4, &live, 5)
	for _, w := range []string{"abc", "defg", "hij"} {
		_, _ = b.Write([]byte(w))
	}
	if live.String() != "abcde" {
		t.Fatalf("live got %q, want %q", live.String(), "abcde")
	}
	if s := b.Stream(); string(s.Head) != "ab" || string(s.Tail) != "ij" || !s.Truncated {
		t.Fatalf("stream %+v", s)
	}
}

func BenchmarkWrite(b *testing.B) {
	buf := New(1<<20, nil, 0)
	chunk := bytes.Repeat([]byte("x"), 128<<10)
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		_, _ = buf.Write(chunk)
	}
}
