//go:build unix

package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"golang.org/x/sys/unix"
)

// ErrNotFound is returned (wrapped) by FindByID when no run has the ID.
var ErrNotFound = errors.New("event not found")

// ReadLast returns the last n events of the log at path, oldest first and
// newest last, reading the rotated files path.1, path.2, ... when the
// current file holds fewer than n. n <= 0 returns every event. A missing
// log holds no events (nil, nil). Lines that are not events (a line cut
// short by a crash, say) are skipped.
func ReadLast(path string, n int) ([]Event, error) {
	var files [][]Event // newest file first
	total := 0
	err := walk(path, func(evs []Event) bool {
		files = append(files, evs)
		total += len(evs)
		return n > 0 && total >= n
	})
	if err != nil {
		return nil, fmt.Errorf("read last %d events: %w", n, err)
	}
	var out []Event
	for _, evs := range slices.Backward(files) {
		out = append(out, evs...)
	}
	if n > 0 && len(out) > n {
		out = out[len(out)-n:]
	}
	return out, nil
}

// FindByID returns the newest event whose RunID is id. It returns an error
// wrapping ErrNotFound when there is none.
func FindByID(path, id string) (Event, error) {
	if id == "" {
		return Event{}, fmt.Errorf("find run: empty id: %w", ErrNotFound)
	}
	var found Event
	ok := false
	err := walk(path, func(evs []Event) bool {
		for _, e := range slices.Backward(evs) {
			if e.RunID == id {
				found, ok = e, true
				return true
			}
		}
		return false
	})
	if err != nil {
		return Event{}, fmt.Errorf("find run %q: %w", id, err)
	}
	if !ok {
		return Event{}, fmt.Errorf("find run %q in %s: %w", id, path, ErrNotFound)
	}
	return found, nil
}

// walk hands visit the events of path, then path.1, path.2, ... (newest
// file first, each in file order) until visit returns true or a rotated
// file is missing. It holds a shared flock on the current file meanwhile,
// which keeps writers from rotating under it.
func walk(path string, visit func([]Event) bool) error {
	unlock, err := rlock(path)
	if err != nil {
		return err
	}
	defer unlock()
	for i := 0; ; i++ {
		evs, err := readFile(rotated(path, i))
		if errors.Is(err, os.ErrNotExist) {
			if i == 0 {
				continue // mid-rotation, or only rotated files remain
			}
			return nil
		}
		if err != nil {
			return err
		}
		if visit(evs) {
			return nil
		}
	}
}

// rlock takes a shared flock on the file now at path and returns its
// release. A missing file is not locked (there is nothing to rotate).
func rlock(path string) (func(), error) {
	for range maxAttempts {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return func() {}, nil
		}
		if err != nil {
			return nil, fmt.Errorf("open event log: %w", err)
		}
		fd := int(f.Fd())
		if err := flock(fd, unix.LOCK_SH); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("stat open %s: %w", path, err)
		}
		cur, err := isAt(path, &st)
		if err != nil {
			_ = f.Close()
			return nil, err
		}
		if cur {
			return func() { _ = f.Close() }, nil // closing releases the lock
		}
		_ = f.Close()
	}
	return nil, fmt.Errorf("lock %s: kept being replaced (%d attempts)", path, maxAttempts)
}

// readFile parses the events of one log file, skipping lines that are not
// events.
func readFile(name string) ([]Event, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("read event log: %w", err)
	}
	defer f.Close()
	var evs []Event
	r := bufio.NewReaderSize(f, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			if e, ok := parseLine(line); ok {
				evs = append(evs, e)
			}
		}
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read event log %s: %w", name, err)
		}
	}
}

// parseLine decodes one line; it reports false for anything but a JSON
// object with a run ID.
func parseLine(line []byte) (Event, bool) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return Event{}, false
	}
	var e Event
	if err := json.Unmarshal(line, &e); err != nil || e.RunID == "" {
		return Event{}, false
	}
	return e, true
}
