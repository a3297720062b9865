//go:build unix

package eventlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// testEvent is event seq of writer w; its argv carries both, padded to a
// length that varies with seq so torn or interleaved lines would show.
func testEvent(w, seq int) Event {
	return Event{
		Scope:    "test",
		Profile:  "default",
		Backend:  "landlock",
		Layers:   []string{"landlock", "seccomp"},
		Argv:     []string{"writer", strconv.Itoa(w), strconv.Itoa(seq), strings.Repeat("x", 10+(w*7+seq*13)%200)},
		EnvNames: EnvNames([]string{"PATH=/usr/bin", "HOME=/tmp"}),
		Limits:   spec.DefaultLimits(),
		Guarantees: []spec.Guarantee{
			{Name: "no-network", Mechanism: "seccomp"},
			{Name: "no-foreign-signals", Waived: true},
		},
	}
}

// logFiles returns the current file and every rotated one that exists.
func logFiles(t *testing.T, path string) []string {
	t.Helper()
	files, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// checkLog reads every file of the log at path and checks that each line
// is a whole JSON event, that each (writer, seq) of writers x perWriter
// appears exactly once, and that no file exceeds maxBytes (when > 0).
func checkLog(t *testing.T, path string, writers, perWriter int, maxBytes int64) {
	t.Helper()
	seen := make(map[[2]int]int)
	lines := 0
	for _, name := range logFiles(t, path) {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			t.Errorf("%s does not end in a newline", name)
		}
		if maxBytes > 0 && int64(len(data)) > maxBytes {
			t.Errorf("%s is %d bytes, over the %d limit", name, len(data), maxBytes)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines++
			var e Event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("%s: line %q is not JSON: %v", name, sc.Text(), err)
			}
			if len(e.Argv) != 4 || e.Argv[0] != "writer" {
				t.Fatalf("%s: unexpected event argv %q", name, e.Argv)
			}
			w, _ := strconv.Atoi(e.Argv[1])
			s, _ := strconv.Atoi(e.Argv[2])
			if want := testEvent(w, s).Argv[3]; e.Argv[3] != want {
				t.Fatalf("%s: event %d/%d has a damaged argv", name, w, s)
			}
			seen[[2]int{w, s}]++
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if want := writers * perWriter; lines != want {
		t.Errorf("%d lines across %d files, want %d", lines, len(logFiles(t, path)), want)
	}
	for w := range writers {
		for s := range perWriter {
			if n := seen[[2]int{w, s}]; n != 1 {
				t.Errorf("event %d/%d appears %d times", w, s, n)
			}
		}
	}
}

func TestConcurrentGoroutines(t *testing.T) {
	const writers, perWriter = 50, 20
	tests := []struct {
		name     string
		shared   bool // one Log for all goroutines, or one Log each
		maxBytes int64
		keep     int
	}{
		{"shared log", true, 0, 0},
		{"a log each", false, 0, 0},
		{"shared log rotating", true, 4096, 10000},
		{"a log each rotating", false, 4096, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			shared, err := Open(path, tt.maxBytes, tt.keep)
			if err != nil {
				t.Fatal(err)
			}
			defer shared.Close()
			var wg sync.WaitGroup
			errs := make(chan error, writers)
			for w := range writers {
				wg.Go(func() {
					l := shared
					if !tt.shared {
						var err error
						if l, err = Open(path, tt.maxBytes, tt.keep); err != nil {
							errs <- err
							return
						}
						defer l.Close()
					}
					for s := range perWriter {
						if err := l.Record(testEvent(w, s)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			checkLog(t, path, writers, perWriter, tt.maxBytes)
			if tt.maxBytes > 0 && len(logFiles(t, path)) < 2 {
				t.Errorf("no rotation happened")
			}
		})
	}
}

func TestConcurrentProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns 20 processes")
	}
	const writers, perWriter = 20, 25
	tests := []struct {
		name     string
		maxBytes int64
		keep     int
	}{
		{"no rotation", 0, 0},
		{"rotating", 4096, 10000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			start := time.Now().Add(500 * time.Millisecond).UnixNano()
			cmds := make([]*exec.Cmd, writers)
			outs := make([]*bytes.Buffer, writers)
			for w := range writers {
				outs[w] = new(bytes.Buffer)
				cmds[w] = exec.Command(os.Args[0], "-test.run=^$")
				cmds[w].Env = append(os.Environ(), fmt.Sprintf("%s=%s|%d|%d|%d|%d|%d", writerEnv, path, tt.maxBytes, tt.keep, w, perWriter, start))
				cmds[w].Stdout, cmds[w].Stderr = outs[w], outs[w]
				if err := cmds[w].Start(); err != nil {
					t.Fatal(err)
				}
			}
			for w, c := range cmds {
				if err := c.Wait(); err != nil {
					t.Errorf("writer %d: %v\n%s", w, err, outs[w])
				}
			}
			checkLog(t, path, writers, perWriter, tt.maxBytes)
			if tt.maxBytes > 0 && len(logFiles(t, path)) < 2 {
				t.Errorf("no rotation happened")
			}
		})
	}
}

func TestRotationKeep(t *testing.T) {
	line, err := mustNormalize(t, testEvent(0, 0)).line()
	if err != nil {
		t.Fatal(err)
	}
	// Room for about three lines per file.
	maxBytes := int64(len(line))*3 + int64(len(line))/2
	tests := []struct {
		name  string
		keep  int
		files []string // suffixes expected after 20 writes
	}{
		{"keep 0", 0, []string{""}},
		{"keep 1", 1, []string{"", ".1"}},
		{"keep 3", 3, []string{"", ".1", ".2", ".3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l, err := Open(path, maxBytes, tt.keep)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			const writes = 20
			for s := range writes {
				if err := l.Record(testEvent(0, s)); err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for _, suf := range tt.files {
				want = append(want, path+suf)
			}
			if got := logFiles(t, path); strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("files %q, want %q", got, want)
			}
			// What is kept is the newest events, in order, ending with the last.
			evs, err := ReadLast(path, 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) < tt.keep+1 || len(evs) >= writes {
				t.Fatalf("%d events kept with keep %d", len(evs), tt.keep)
			}
			for i, e := range evs {
				if want := strconv.Itoa(writes - len(evs) + i); e.Argv[2] != want {
					t.Fatalf("event %d is seq %s, want %s", i, e.Argv[2], want)
				}
			}
		})
	}
}

// TestReopenAfterRotation checks that a Log whose file another Log (or
// logrotate) moved away writes to the new file at the path.
func TestReopenAfterRotation(t *testing.T) {
	tests := []struct {
		name   string
		rotate func(t *testing.T, path string)
	}{
		{"renamed away", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
		}},
		{"renamed and recreated", func(t *testing.T, path string) {
			if err := os.Rename(path, path+".1"); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"rotated by another Log", func(t *testing.T, path string) {
			other, err := Open(path, 1, 5) // every non-empty file is full
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if err := other.Record(testEvent(1, 0)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "events.jsonl")
			l, err := Open(path, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if err := l.Record(testEvent(0, 0)); err != nil {
				t.Fatal(err)
			}
			tt.rotate(t, path)
			if err := l.Record(testEvent(0, 1)); err != nil {
				t.Fatal(err)
			}
			evs, err := readFile(path)
			if err != nil {
				t.Fatal(err)
			}
			last := evs[len(evs)-1]
			if last.Argv[1] != "0" || last.Argv[2] != "1" {
				t.Fatalf("last event in %s is %q, want writer 0 seq 1", path, last.Argv)
			}
			old, err := readFile(path + ".1")
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range old {
				if e.Argv[1] == "0" && e.Argv[2] == "1" {
					t.Fatalf("event written to the rotated file")
				}
			}
		})
	}
}

func TestModes(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state", "confine", "events.jsonl")
	l, err := Open(path, 1, 2) // every write after the first rotates
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for s := range 3 {
		if err := l.Record(testEvent(0, s)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		path string
		mode os.FileMode
	}{
		{filepath.Join(dir, "state"), os.ModeDir | 0o700},
		{filepath.Join(dir, "state", "confine"), os.ModeDir | 0o700},
		{path, 0o600},
		{path + ".1", 0o600},
		{path + ".2", 0o600},
	}
	for _, tt := range tests {
		fi, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tt.mode {
			t.Errorf("%s: mode %v, want %v", tt.path, fi.Mode(), tt.mode)
		}
	}
}

func TestNoEnvValueInLog(t *testing.T) {
	env := []string{"SECRET=hunter2", "PATH=/usr/bin"}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := Open(path, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	direct := testEvent(0, 0)
	direct.EnvNames = EnvNames(env)
	var fromSpec Event
	fromSpec.SetSpec(spec.CommandSpec{Program: "/bin/true", Worktree: "/w", Env: env})
	refused := testEvent(0, 1)
	refused.EnvNames = EnvNames(env)
	refused.Error = RedactEnv(`invalid command spec: environment entry "SECRET=hunter2\x00" is not NAME=VALUE`, env)
	for _, e := range []Event{direct, fromSpec, refused} {
		if err := l.Record(e); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte("hunter2")) {
		t.Fatalf("log holds an environment value:\n%s", data)
	}
	if n := bytes.Count(data, []byte(`"env_names":["PATH","SECRET"]`)); n != 3 {
		t.Fatalf("env names recorded %d times, want 3:\n%s", n, data)
	}
}

func TestRecordClosed(t *testing.T) {
	l, err := Open(filepath.Join(t.TempDir(), "events.jsonl"), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := l.Record(testEvent(0, 0)); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Record after Close = %v, want a closed error", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		path string
		keep int
		want string
	}{
		{"empty path", "", 0, "empty path"},
		{"negative keep", filepath.Join(dir, "e.jsonl"), -1, "negative"},
		{"parent is a file", filepath.Join(file, "e.jsonl"), 0, "not a directory"},
		{"path is a directory", dir, 0, "is a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(tt.path, 0, tt.keep)
			if err == nil {
				l.Close()
				t.Fatalf("Open(%q) succeeded", tt.path)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open(%q) = %v, want it to mention %q", tt.path, err, tt.want)
			}
		})
	}
}

func TestDefaultPath(t *testing.T) {
	noDB := func() (string, error) { return "", errors.New("no such user") }
	db := func(h string) func() (string, error) { return func() (string, error) { return h, nil } }
	tests := []struct {
		name  string
		xdg   string
		home  string
		db    func() (string, error)
		want  string
		fails bool
	}{
		{"xdg", "/xdg/state", "/home/u", noDB, "/xdg/state/confine/events.jsonl", false},
		{"no xdg", "", "/home/u", noDB, "/home/u/.local/state/confine/events.jsonl", false},
		{"relative xdg ignored", "rel/state", "/home/u", noDB, "/home/u/.local/state/confine/events.jsonl", false},
		{"no home: user database", "", "", db("/var/lib/svc"), "/var/lib/svc/.local/state/confine/events.jsonl", false},
		{"relative home: user database", "", "rel", db("/var/lib/svc/"), "/var/lib/svc/.local/state/confine/events.jsonl", false},
		{"no home, not in the user database", "", "", noDB, "", true},
		{"no home, relative home in the user database", "", "", db("rel"), "", true},
		{"no home, empty home in the user database", "", "", db(""), "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"XDG_STATE_HOME": tt.xdg, "HOME": tt.home}
			got, err := defaultPath(func(k string) string { return env[k] }, tt.db)
			if tt.fails {
				if !errors.Is(err, ErrNoDefaultPath) {
					t.Fatalf("defaultPath() = %q, %v; want ErrNoDefaultPath", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("defaultPath() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func mustNormalize(t *testing.T, e Event) Event {
	t.Helper()
	e, err := e.normalize()
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestRotateGap checks that rotation shifts only the run of rotated files
// up to the first missing one, so a file past a gap is not overwritten.
func TestRotateGap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	for suf, content := range map[string]string{"": "cur\n", ".1": "one\n", ".3": "three\n"} {
		if err := os.WriteFile(path+suf, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := Open(path, 1, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Record(testEvent(0, 0)); err != nil {
		t.Fatal(err)
	}
	for suf, want := range map[string]string{".1": "cur\n", ".2": "one\n", ".3": "three\n"} {
		got, err := os.ReadFile(path + suf)
		if err != nil || string(got) != want {
			t.Errorf("%s holds %q, %v; want %q", suf, got, err, want)
		}
	}
	if got := len(logFiles(t, path)); got != 4 {
		t.Errorf("%d files, want 4", got)
	}
}
