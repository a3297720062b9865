// Package capture keeps a bounded head and tail of an output stream while
// draining it to EOF, so a child can never block on a full pipe and the
// launcher's memory stays bounded whatever the child writes.
package capture

import (
	"errors"
	"io"
	"slices"

	"github.com/confine-sandbox/confine/spec"
)

// Buffer keeps the first headCap and the last tailCap bytes written to it.
type Buffer struct {
	head    []byte
	tail    []byte // ring of tailCap bytes, allocated when the head is full
	tailCap int
	tailPos int // next write index in tail
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
		tailCap:   int(limit / 2),
		live:      live,
		liveLimit: liveLimit,
	}
}

// Write implements io.Writer; it never fails (a failing live writer is
// dropped so that capture goes on).
func (b *Buffer) Write(p []byte) (int, error) {
	n := len(p)
	b.toLive(p)
	b.total += int64(n)
	if room := b.headCap - len(b.head); room > 0 {
		k := min(room, len(p))
		if b.head == nil {
			b.head = make([]byte, 0, min(b.headCap, 64<<10))
		}
		b.head = append(b.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 || b.tailCap == 0 {
		return n, nil
	}
	b.ensureTail()
	if len(p) >= len(b.tail) {
		copy(b.tail, p[len(p)-len(b.tail):])
		b.tailPos, b.tailLen = 0, len(b.tail)
		return n, nil
	}
	k := copy(b.tail[b.tailPos:], p)
	if k < len(p) {
		copy(b.tail, p[k:])
	}
	b.advance(len(p))
	return n, nil
}

// toLive passes p, the next bytes of the stream, to the live writer within
// its limit.
// ensureTail allocates the ring on first use: most commands never fill
// the head, and zeroing half the limit per stream per run is not free.
func (b *Buffer) ensureTail() {
	if b.tail == nil {
		b.tail = make([]byte, b.tailCap)
	}
}

func (b *Buffer) toLive(p []byte) {
	if b.live == nil || b.liveDead {
		return
	}
	if b.liveLimit > 0 {
		room := b.liveLimit - b.total
		if room <= 0 {
			return
		}
		if int64(len(p)) > room {
			p = p[:room]
		}
	}
	if len(p) > 0 {
		if _, err := b.live.Write(p); err != nil {
			b.liveDead = true
		}
	}
}

// advance moves the ring's write index past n bytes just stored at it.
func (b *Buffer) advance(n int) {
	b.tailPos = (b.tailPos + n) % len(b.tail)
	b.tailLen = min(b.tailLen+n, len(b.tail))
}

// ringSpace is where the next bytes of the stream go once the head is
// full: the ring from its write index to its end. It is nil while the
// head still has room or when there is no ring.
func (b *Buffer) ringSpace() []byte {
	if len(b.head) < b.headCap || b.tailCap == 0 {
		return nil
	}
	b.ensureTail()
	return b.tail[b.tailPos:]
}

// commitRing accounts for n bytes that were read straight into
// ringSpace().
func (b *Buffer) commitRing(n int) {
	b.toLive(b.tail[b.tailPos : b.tailPos+n])
	b.total += int64(n)
	b.advance(n)
}

// Stream returns what was kept. Call it after the last Write: the tail it
// returns shares the ring's memory (the ring is rotated in place rather
// than copied, so a capture of L bytes never needs more than L bytes).
func (b *Buffer) Stream() spec.Stream {
	s := spec.Stream{Head: b.head, Total: b.total}
	if b.head == nil {
		s.Head = []byte{}
	}
	if b.total <= int64(len(b.head)) {
		return s
	}
	// Bytes beyond the head: the tail ring holds the newest of them,
	// oldest first once rotated to start at index 0.
	if b.tailLen == len(b.tail) && b.tailPos != 0 {
		slices.Reverse(b.tail[:b.tailPos])
		slices.Reverse(b.tail[b.tailPos:])
		slices.Reverse(b.tail)
		b.tailPos = 0
	}
	tail := b.tail[:b.tailLen]
	s.Tail = tail
	s.Truncated = b.total > int64(len(b.head))+int64(len(tail))
	if !s.Truncated {
		// Everything fits: present it as one contiguous head.
		s.Head = append(s.Head, tail...)
		s.Tail = nil
	}
	return s
}

// Drain reads r to EOF into b with bounded memory. Once the head is full it
// reads straight into the tail ring, so each byte of a flood is copied once
// (by the kernel, out of the pipe), as cat(1) would, not twice.
func Drain(r io.Reader, b *Buffer) error {
	var scratch []byte
	for {
		dst := b.ringSpace()
		ring := dst != nil
		if !ring {
			// Start small and grow when reads fill it: most commands
			// write little, and 128 KiB per stream were a cost of
			// every launch.
			if scratch == nil {
				scratch = make([]byte, 4<<10)
			}
			dst = scratch
		}
		n, err := r.Read(dst)
		if n > 0 {
			if ring {
				b.commitRing(n)
			} else {
				_, _ = b.Write(dst[:n])
				if n == len(scratch) && len(scratch) < 128<<10 {
					scratch = make([]byte, 2*len(scratch))
				}
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}
