// Package capture keeps a bounded head and tail of an output stream while
// draining it to EOF, so a child can never block on a full pipe and the
// launcher's memory stays bounded whatever the child writes.
package capture

import (
	"errors"
	"io"
	"os"

	"github.com/confine-sandbox/confine/spec"
)

// Buffer keeps the first headCap and the last tailCap bytes written to it.
type Buffer struct {
	head    []byte
	tail    []byte // ring of tailCap bytes
	tailPos int    // next write index in tail
	tailLen int
	headCap int
	total   int64

	live      io.Writer
	liveLimit int64 // 0: unlimited
	liveDead  bool
}

// New returns a Buffer that keeps at most limit bytes: half from the start
// of the stream and half from its end (the error is usually at the end of a
// build log). live, when non-nil, receives the stream as it arrives; with
// liveLimit > 0 it receives only the first liveLimit bytes.
func New(limit int64, live io.Writer, liveLimit int64) *Buffer {
	if limit < 0 {
		limit = 0
	}
	h := limit - limit/2
	return &Buffer{
		headCap:   int(h),
		tail:      make([]byte, limit/2),
		live:      live,
		liveLimit: liveLimit,
	}
}

// Write implements io.Writer; it never fails (a failing live writer is
// dropped so that capture goes on).
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	if b.live != nil && !b.liveDead {
		q := p
		if b.liveLimit > 0 {
			room := b.liveLimit - b.total
			if room <= 0 {
				q = nil
			} else if int64(len(q)) > room {
				q = q[:room]
			}
		}
		if len(q) > 0 {
			if _, err := b.live.Write(q); err != nil {
				b.liveDead = true
			}
		}
	}
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		if b.head == nil {
			b.head = make([]byte, 0, min(b.headCap, 64<<10))
		}
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || len(b.tail) == 0 {
		return n, nil
	}
	if len(p) >= len(b.tail) {
		copy(b.tail, p[len(p)-len(b.tail):])
		b.tailPos, b.tailLen = 0, len(b.tail)
		return n, nil
	}
	k := copy(b.tail[b.tailPos:], p)
	if k < len(p) {
		copy(b.tail, p[k:])
	}
	b.tailPos = (b.tailPos + len(p)) % len(b.tail)
	b.tailLen = min(b.tailLen+len(p), len(b.tail))
	return n, nil
}

// Stream returns what was kept.
func (b *Buffer) Stream() spec.Stream {
	s := spec.Stream{Head: b.head, Total: b.total}
	if b.head == nil {
		s.Head = []byte{}
	}
	if b.total <= int64(len(b.head)) {
		return s
	}
	// Bytes beyond the head: the tail ring holds the newest of them.
	tail := make([]byte, 0, b.tailLen)
	if b.tailLen < len(b.tail) {
		tail = append(tail, b.tail[:b.tailLen]...)
	} else {
		tail = append(tail, b.tail[b.tailPos:]...)
		tail = append(tail, b.tail[:b.tailPos]...)
	}
	s.Tail = tail
	s.Truncated = b.total > int64(len(b.head))+int64(len(tail))
	if !s.Truncated {
		// Everything fits: present it as one contiguous head.
		s.Head = append(s.Head, tail...)
		s.Tail = nil
	}
	return s
}

// Drain reads r to EOF into b with a fixed buffer, so memory stays bounded.
func Drain(r *os.File, b *Buffer) error {
	buf := make([]byte, 128<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = b.Write(buf[:n])
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
