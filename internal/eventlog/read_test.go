//go:build unix

package eventlog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// seqs returns the seq numbers (argv[2]) of evs.
func seqs(evs []Event) string {
	var s []string
	for _, e := range evs {
		s = append(s, e.Argv[2])
	}
	return strings.Join(s, ",")
}

// writeLog records events 0..n-1 of writer 0, rotating every write when
// rotate is set (so each event ends up in a file of its own).
func writeLog(t *testing.T, n int, rotate bool) (string, []Event) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "events.jsonl")
	maxBytes := int64(0)
	if rotate {
		maxBytes = 1
	}
	l, err := Open(path, maxBytes, 100)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var evs []Event
	for s := range n {
		e := testEvent(0, s)
		e.RunID = "run" + strconv.Itoa(s)
		e.Time = time.Now()
		if err := l.Record(e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, mustNormalize(t, e))
	}
	return path, evs
}

func TestReadLast(t *testing.T) {
	tests := []struct {
		name   string
		events int
		rotate bool
		n      int
		want   string
	}{
		{"last one", 5, false, 1, "4"},
		{"last three", 5, false, 3, "2,3,4"},
		{"all by zero", 5, false, 0, "0,1,2,3,4"},
		{"more than there are", 5, false, 9, "0,1,2,3,4"},
		{"across rotated files", 5, true, 3, "2,3,4"},
		{"all rotated", 5, true, 0, "0,1,2,3,4"},
		{"empty log", 0, false, 3, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, _ := writeLog(t, tt.events, tt.rotate)
			got, err := ReadLast(path, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if seqs(got) != tt.want {
				t.Fatalf("ReadLast(%d) = %s, want %s", tt.n, seqs(got), tt.want)
			}
		})
	}
}

func TestReadLastRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e := fullEvent()
	e.Argv = []string{"printf", "%s\n", "<&>"} // valid UTF-8, so it reads back unchanged
	if err := l.Record(e); err != nil {
		t.Fatal(err)
	}
	got, err := ReadLast(path, 1)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustNormalize(t, e); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("read back\n%+v\nwant\n%+v", got, want)
	}
}

func TestReadSkipsDamagedLines(t *testing.T) {
	path, _ := writeLog(t, 3, false)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A foreign line, a line with no run id, and a torn final line.
	if _, err := f.WriteString("not json\n{}\n{\"run_id\":\"torn\",\"argv\":[\"wri"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got, err := ReadLast(path, 2)
	if err != nil {
		t.Fatal(err)
	}
	if seqs(got) != "1,2" {
		t.Fatalf("ReadLast = %s, want 1,2", seqs(got))
	}
}

func TestReadMissingLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "none", "events.jsonl")
	got, err := ReadLast(path, 5)
	if err != nil || got != nil {
		t.Fatalf("ReadLast of a missing log = %v, %v; want nil, nil", got, err)
	}
	if _, err := FindByID(path, "x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindByID in a missing log = %v, want ErrNotFound", err)
	}
}

func TestFindByID(t *testing.T) {
	tests := []struct {
		name   string
		rotate bool
		id     string
		want   string // seq, or "" for not found
	}{
		{"newest", false, "run4", "4"},
		{"oldest", false, "run0", "0"},
		{"in a rotated file", true, "run1", "1"},
		{"in the current file after rotation", true, "run4", "4"},
		{"absent", false, "run9", ""},
		{"prefix is not a match", false, "run", ""},
		{"empty id", false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, evs := writeLog(t, 5, tt.rotate)
			got, err := FindByID(path, tt.id)
			if tt.want == "" {
				if !errors.Is(err, ErrNotFound) {
					t.Fatalf("FindByID(%q) = %+v, %v; want ErrNotFound", tt.id, got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			i, _ := strconv.Atoi(tt.want)
			if !reflect.DeepEqual(got, evs[i]) {
				t.Fatalf("FindByID(%q) =\n%+v\nwant\n%+v", tt.id, got, evs[i])
			}
		})
	}
}
