package landlock

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// globDir answers what filepath.Glob answers whenever the directory
// changed, and remembers its answer only for a directory unchanged for
// globSettled: each step below changes the directory (or, to show what
// is remembered, puts its modification time back) and says what the next
// call must return.
func TestGlobDir(t *testing.T) {
	dir := t.TempDir()
	// Each age is an hour earlier than the last (and than now), so each
	// differs from any remembered modification time but the one restored
	// on purpose below.
	old := time.Now().Add(-time.Hour)
	mk := func(name string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	rm := func(name string) {
		if err := os.Remove(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	age := func() {
		old = old.Add(-time.Hour)
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	// A modification time in the future is never settled, however slowly
	// the test runs.
	recent := time.Now().Add(time.Hour)
	setTime := func(t0 time.Time) {
		if err := os.Chtimes(dir, t0, t0); err != nil {
			t.Fatal(err)
		}
	}
	restore := func() {
		if err := os.Chtimes(dir, old, old); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"empty, settled", age, nil},
		{"an entry added", func() { mk("python3") }, []string{"python3"}},
		{"another, not matching, then settled", func() { mk("perl"); age() }, []string{"python3"}},
		{"a second entry added", func() { mk("python3.11") }, []string{"python3", "python3.11"}},
		{"settled: remembered", age, []string{"python3", "python3.11"}},
		// The modification time put back exactly as remembered: the
		// remembered answer, which shows the listing was not made again.
		{"an entry removed behind the modification time's back", func() { rm("python3"); restore() }, []string{"python3", "python3.11"}},
		{"the directory touched now: listed again", func() {
			if err := os.Chtimes(dir, time.Now(), time.Now()); err != nil {
				t.Fatal(err)
			}
		}, []string{"python3.11"}},
		// Changed within globSettled: not remembered, so even a change
		// the modification time does not show is seen at the next call.
		{"recent", func() { setTime(recent) }, []string{"python3.11"}},
		{"recent, an entry removed behind the modification time's back", func() { rm("python3.11"); setTime(recent) }, nil},
	}
	for _, s := range steps {
		s.change()
		got := globDir(dir, "python3*")
		var want []string
		for _, n := range s.want {
			want = append(want, filepath.Join(dir, n))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: globDir = %q, want %q", s.name, got, want)
		}
	}
	if got := globDir(filepath.Join(dir, "missing"), "python3*"); got != nil {
		t.Errorf("globDir of a missing directory = %q, want nothing", got)
	}
}
