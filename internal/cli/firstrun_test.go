//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
	"golang.org/x/sys/unix"
)

// The default event log is a convenience: when it cannot be opened the run
// goes ahead, and the result (and -v) say so; a log the caller named that
// cannot be written refuses the run.
func TestEventLogFirstRun(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			wd := testutil.Workdir(t, u.UID)
			// Confine's files lie outside the work directory: a run
			// refuses a writable root that holds them.
			aux := testutil.Workdir(t, u.UID)
			// A regular file where a directory would have to be: no uid,
			// root included, can create the log beneath it.
			blocker := filepath.Join(aux, "blocker")
			if err := os.WriteFile(blocker, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(aux, "state")
			key := filepath.Join(aux, "cap.key")
			if r := cli(t, u, wd, "cap", "keygen", "--cap-key", key); r.Code != 0 {
				t.Fatalf("cap keygen: %d %s", r.Code, r.Stderr)
			}
			tests := []struct {
				name       string
				env        []string
				args       []string
				code       int
				skipped    bool   // event_log_skipped set in the result
				stderr     string // must appear on stderr
				noStderr   string // must not appear on stderr
				loggedInto string // event log file that must hold the run
				refusal    string // kind of the --json refusal when code is 125 (default: usage, about the event log)
			}{
				{"default unusable: the run goes ahead", []string{"CONFINE_EVENT_LOG=", "XDG_STATE_HOME=" + blocker + "/state"},
					[]string{"run", "--json", "--", "true"}, 0, true, "", "event log", "", ""},
				{"default unusable: -v says so", []string{"CONFINE_EVENT_LOG=", "XDG_STATE_HOME=" + blocker + "/state"},
					[]string{"run", "-v", "--", "true"}, 0, false, "event log skipped", "", "", ""},
				{"default usable: recorded", []string{"CONFINE_EVENT_LOG=", "XDG_STATE_HOME=" + state},
					[]string{"run", "--json", "--", "true"}, 0, false, "", "event log", filepath.Join(state, "confine", "events.jsonl"), ""},
				{"--event-log unwritable: refused", nil,
					[]string{"run", "--json", "--event-log", blocker + "/log", "--", "true"}, 125, false, "event log " + blocker + "/log", "", "", ""},
				{"CONFINE_EVENT_LOG unwritable: refused", []string{"CONFINE_EVENT_LOG=" + blocker + "/log"},
					[]string{"run", "--json", "--", "true"}, 125, false, "event log " + blocker + "/log", "", "", ""},
				// The capability is checked before the event log: a caller
				// without the right to run hears that first.
				{"bad capability and unwritable --event-log: the capability's refusal", nil,
					[]string{"run", "--json", "--cap", "not-a-token", "--cap-key", key, "--event-log", blocker + "/log", "--", "true"}, 125, false, "capability", "event log", "", "capability"},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: tt.env, Args: tt.args}.Run(t)
					if r.Code != tt.code {
						t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, tt.code, r.Stdout, r.Stderr)
					}
					if tt.stderr != "" && !strings.Contains(r.Stderr, tt.stderr) {
						t.Errorf("stderr %q lacks %q", r.Stderr, tt.stderr)
					}
					if tt.noStderr != "" && strings.Contains(r.Stderr, tt.noStderr) {
						t.Errorf("stderr %q mentions %q", r.Stderr, tt.noStderr)
					}
					if tt.code == 0 && slices.Contains(tt.args, "--json") {
						var res spec.CommandResult
						if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
							t.Fatalf("result: %v\n%s", err, r.Stdout)
						}
						if got := res.EventLogSkipped != ""; got != tt.skipped {
							t.Errorf("event_log_skipped = %q, want set: %v", res.EventLogSkipped, tt.skipped)
						}
						if tt.loggedInto != "" {
							b, err := os.ReadFile(tt.loggedInto)
							if err != nil || !strings.Contains(string(b), res.RunID) {
								t.Errorf("event log %s does not hold run %s: %v", tt.loggedInto, res.RunID, err)
							}
						}
					}
					if tt.code == 125 {
						ref := refusalOf(t, r.Stdout)
						switch {
						case tt.refusal == "" && (!strings.Contains(ref.Error.Message, "event log") || ref.Error.Kind != "usage"),
							tt.refusal != "" && ref.Error.Kind != tt.refusal,
							ref.Error.ExitStatus != 125:
							t.Errorf("refusal %+v", ref)
						}
					}
				})
			}
		})
	}
}

// With neither HOME nor XDG_STATE_HOME (systemd units, some CI runners)
// a run is not refused: the log goes under the home directory the user
// database gives, or, where that is unusable, is skipped and the result
// says so. Run as nobody, whose home is not the developer's.
func TestNoHomeDoesNotRefuse(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root to run as uid %d: as this uid the log would go into the real home directory", testutil.NobodyUID)
	}
	wd := testutil.Workdir(t, testutil.NobodyUID)
	// testutil.CLI passes neither HOME nor XDG_STATE_HOME.
	r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: testutil.NobodyUID, Dir: wd, Env: []string{"CONFINE_EVENT_LOG="},
		Args: []string{"run", "--json", "--", "sh", "-c", "echo $HOME"}}.Run(t)
	if r.Code != 0 {
		t.Fatalf("exit %d without HOME\nstdout: %s\nstderr: %s", r.Code, r.Stdout, r.Stderr)
	}
	var res spec.CommandResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatal(err)
	}
	home := ""
	if pw, err := user.LookupId(strconv.Itoa(testutil.NobodyUID)); err == nil {
		home = pw.HomeDir
	}
	logPath := filepath.Join(home, ".local", "state", "confine", "events.jsonl")
	writable := filepath.IsAbs(home) && unix.Access(home, unix.W_OK) == nil
	t.Logf("nobody's home %q (writable by the test: %v); event_log_skipped %q", home, writable, res.EventLogSkipped)
	switch {
	case res.EventLogSkipped != "":
		if _, err := os.Stat(logPath); home != "" && err == nil {
			t.Errorf("log skipped (%s) but %s exists", res.EventLogSkipped, logPath)
		}
	case home == "":
		t.Errorf("no home in the user database, yet the log was not skipped")
	default:
		b, err := os.ReadFile(logPath)
		if err != nil || !strings.Contains(string(b), res.RunID) {
			t.Errorf("not skipped, but %s does not hold run %s: %v", logPath, res.RunID, err)
		}
	}
	if strings.TrimSpace(string(res.Stdout.Head)) == "" {
		t.Errorf("the command got no HOME: %q", res.Stdout.Head)
	}
}

// The PATH note is in the result always, and on stderr only with -v.
func TestPathNoteVerbose(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	// A directory outside every read root (and the work directory).
	outside, err := os.MkdirTemp(testutil.SharedDir(t), "path-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(outside) })
	env := []string{"PATH=/usr/bin:/bin:" + outside}
	for _, tt := range []struct {
		name    string
		args    []string
		stderr  bool
		inJSON  bool
		wantOut string
	}{
		{"quiet", []string{"run", "--", "true"}, false, false, ""},
		{"json", []string{"run", "--json", "--", "true"}, false, true, ""},
		{"-v", []string{"run", "-v", "--", "true"}, true, false, ""},
		{"--verbose --json", []string{"run", "--verbose", "--json", "--", "true"}, true, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: env, Args: tt.args}.Run(t)
			if r.Code != 0 {
				t.Fatalf("exit %d: %s", r.Code, r.Stderr)
			}
			if got := strings.Contains(r.Stderr, "PATH: left out "+outside); got != tt.stderr {
				t.Errorf("PATH note on stderr: %v, want %v (stderr %q)", got, tt.stderr, r.Stderr)
			}
			if tt.inJSON {
				var res spec.CommandResult
				if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
					t.Fatal(err)
				}
				if !slices.Contains(res.PathOmitted, outside) {
					t.Errorf("path_omitted %q lacks %s", res.PathOmitted, outside)
				}
			}
		})
	}
}

// refusalOf parses `run --json`'s refusal object.
func refusalOf(t *testing.T, stdout string) refusalJSON {
	t.Helper()
	var ref refusalJSON
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ref); err != nil || ref.Error.Kind == "" {
		t.Fatalf("stdout is not one refusal object (%v): %q", err, stdout)
	}
	return ref
}

// A refusal under --json is one object naming its kind, with the exit
// status and message stderr carries.
func TestRefusalJSON(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	hostile := filepath.Join(wd, "hostile.toml")
	if err := os.WriteFile(hostile, []byte("name = \"hostile\"\ntier = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		args []string
		kind string
		code int
	}{
		{"not found", []string{"run", "--json", "--", "/nonexistent/program"}, "not_found", 127},
		{"unknown profile", []string{"run", "--json", "--profile", "nope", "--", "true"}, "invalid_spec", 125},
		{"refused variable", []string{"run", "--json", "--env", "AWS_SECRET_ACCESS_KEY=x", "--", "true"}, "invalid_spec", 125},
		{"tier 3", []string{"run", "--json", "--profile", hostile, "--", "true"}, "unavailable", 125},
		{"missing workdir", []string{"run", "--json", "--workdir", "/nonexistent/dir", "--", "true"}, "usage", 125},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := cli(t, u, wd, tt.args...)
			if r.Code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.Code, tt.code, r.Stdout, r.Stderr)
			}
			ref := refusalOf(t, r.Stdout)
			if ref.Error.Kind != tt.kind || ref.Error.ExitStatus != tt.code || !strings.Contains(r.Stderr, ref.Error.Message) {
				t.Errorf("refusal %+v, want kind %s status %d, message as on stderr %q", ref, tt.kind, tt.code, r.Stderr)
			}
		})
	}
}

func TestNamedGuarantees(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want []string
	}{
		{"sandbox unavailable: no-foreign-signals needs landlock abi 6; fs-write-confined needs x", []string{"fs-write-confined", "no-foreign-signals"}},
		{"sandbox unavailable: tier 3 needs a microVM", nil},
		{"no-network-ish is not a name; xno-network neither", nil},
		{"bounded-processes: cannot create a pids cgroup", []string{"bounded-processes"}},
	} {
		got := namedGuarantees(tt.msg)
		slices.Sort(got)
		if !slices.Equal(got, tt.want) {
			t.Errorf("namedGuarantees(%q) = %q, want %q", tt.msg, got, tt.want)
		}
	}
}

func TestRefusalKindsCoverSentinels(t *testing.T) {
	for _, err := range []error{spec.ErrInvalidSpec, spec.ErrCapability, spec.ErrUnavailable, spec.ErrLaunch, spec.ErrNotFound, spec.ErrNotExecutable} {
		var b bytes.Buffer
		printRefusal(&b, refused(ExitConfine, errors.Join(err, errors.New("detail"))))
		var ref refusalJSON
		if json.Unmarshal(b.Bytes(), &ref) != nil || ref.Error.Kind == "usage" || ref.Error.Kind == "" {
			t.Errorf("%v: refusal %s has no kind of its own", err, b.String())
		}
	}
	// The command's own status is not a refusal.
	var b bytes.Buffer
	printRefusal(&b, &exitError{3, ""})
	if b.Len() != 0 {
		t.Errorf("exit 3 printed %q", b.String())
	}
}

func TestVersionJSON(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main([]string{"version", "--json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var v struct {
		Version string `json:"version"`
		JSONAPI int    `json:"json_api"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.JSONAPI != JSONAPI || v.Version == "" {
		t.Fatalf("version --json = %s (%v)", out.String(), err)
	}
}

// The committed manual page is what the command tree generates now; the
// image installs it.
func TestManPageCommitted(t *testing.T) {
	var fresh bytes.Buffer
	if err := WriteManPage(&fresh); err != nil {
		t.Fatal(err)
	}
	const committed = "../../doc/confine.1"
	b, err := os.ReadFile(committed)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, fresh.Bytes()) {
		t.Fatalf("doc/confine.1 differs from the CLI's definitions: regenerate it with `go run ./cmd/confine man > doc/confine.1`")
	}
	var out, errb bytes.Buffer
	if code := Main([]string{"man"}, &out, &errb); code != 0 || !bytes.Equal(out.Bytes(), fresh.Bytes()) {
		t.Fatalf("confine man: exit %d, %d bytes, want the generated page (%s)", code, out.Len(), errb.String())
	}
}
