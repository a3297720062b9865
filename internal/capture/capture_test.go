//go:build linux

package capture

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
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

// chunkReader returns data in reads of the sizes it is given, cycling.
type chunkReader struct {
	data  []byte
	sizes []int
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), len(r.data), r.sizes[r.i%len(r.sizes)])
	r.i++
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestDrainModel checks Drain (which reads into the ring in place) and
// Stream against the definition: the first ceil(L/2) bytes, the last
// floor(L/2), the live copy cut at its limit.
func TestDrainModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := 0; iter < 2000; iter++ {
		limit := int64(rng.IntN(64))
		if iter%10 == 0 {
			limit = int64(rng.IntN(600 << 10))
		}
		size := rng.IntN(int(limit)*3 + 2)
		if iter%7 == 0 {
			size = rng.IntN(1 << 20)
		}
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		sizes := []int{1 + rng.IntN(7), 1 + rng.IntN(300), 1 + rng.IntN(200<<10)}
		liveLimit := int64(rng.IntN(size + 2))
		var live bytes.Buffer
		b := New(limit, &live, liveLimit)
		if err := Drain(&chunkReader{data: data, sizes: sizes}, b); err != nil {
			t.Fatal(err)
		}
		s := b.Stream()
		h := int(limit - limit/2)
		tl := int(limit / 2)
		var wantHead, wantTail []byte
		truncated := false
		if size <= h+tl {
			wantHead = data
		} else {
			wantHead, wantTail, truncated = data[:h], data[size-tl:], true
		}
		if tl == 0 || !truncated {
			wantTail = nil
		}
		wantLive := data
		if liveLimit > 0 && int64(size) > liveLimit {
			wantLive = data[:liveLimit]
		}
		if !bytes.Equal(s.Head, wantHead) || !bytes.Equal(s.Tail, wantTail) || s.Truncated != truncated ||
			s.Total != int64(size) || !bytes.Equal(live.Bytes(), wantLive) {
			t.Fatalf("limit %d size %d reads %v live limit %d: head %d/%d tail %d/%d truncated %v total %d live %d/%d",
				limit, size, sizes, liveLimit, len(s.Head), len(wantHead), len(s.Tail), len(wantTail), s.Truncated,
				s.Total, live.Len(), len(wantLive))
		}
	}
}

// TestDrainFailingLive: a live writer that fails is dropped, capture goes on.
func TestDrainFailingLive(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789"), 1000)
	b := New(100, failWriter{}, 0)
	if err := Drain(&chunkReader{data: data, sizes: []int{33}}, b); err != nil {
		t.Fatal(err)
	}
	if s := b.Stream(); string(s.Head) != string(data[:50]) || string(s.Tail) != string(data[len(data)-50:]) {
		t.Fatalf("stream %q / %q", s.Head, s.Tail)
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("closed") }

func BenchmarkDrain(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 64<<20)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		buf := New(1<<20, nil, 0)
		_ = Drain(&chunkReader{data: data, sizes: []int{128 << 10}}, buf)
	}
}

// TestGrowPipe: the pipe gets the size and its read end stays non-blocking
// (pollable by the runtime), which f.Fd() would have undone.
func TestGrowPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	GrowPipe(r, 256<<10)
	sc, err := r.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var size, flags int
	if err := sc.Control(func(fd uintptr) {
		size, _ = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		flags, _ = unix.FcntlInt(fd, unix.F_GETFL, 0)
	}); err != nil {
		t.Fatal(err)
	}
	if size != 256<<10 {
		t.Errorf("pipe size %d, want %d", size, 256<<10)
	}
	if flags&unix.O_NONBLOCK == 0 {
		t.Error("read end was switched to blocking mode")
	}
	// And Drain still works on it.
	go func() {
		_, _ = w.Write(bytes.Repeat([]byte("z"), 300<<10))
		w.Close()
	}()
	b := New(10, nil, 0)
	if err := Drain(r, b); err != nil {
		t.Fatal(err)
	}
	if s := b.Stream(); s.Total != 300<<10 || string(s.Head) != "zzzzz" || string(s.Tail) != "zzzzz" {
		t.Fatalf("stream %+v", s)
	}
}
