//go:build linux || darwin

package planner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/ctlpaths"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// runCase is one run's inputs and what the validation every OS shares
// must make of them.
type runCase struct {
	name     string
	worktree string   // "": the plain work tree
	rw, ro   []string // asked for besides the work tree (the profile's and the spec's)
	waive    []string
	env      []string
	network  spec.NetworkPolicy
	prog     string
	wantIs   error  // nil: accepted
	want     string // in the refusal
	// hint is the grant a spec.Hinted refusal names.
	hint string
}

// caseDirs are what the table's rows point at.
type caseDirs struct {
	work, gitLink, secret, control, tool, binDir string
	controls                                     []ctlpaths.Path
	callerPATH                                   string
}

// runCases is the one table of inputs both OSes' validation walks: this
// file builds on linux and darwin, and Linux's Validate walks it too
// (build_test.go).
func runCases(t *testing.T) (caseDirs, []runCase) {
	t.Helper()
	canon := func(p string) string {
		c, err := filepath.EvalSymlinks(p)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	d := caseDirs{work: canon(t.TempDir()), gitLink: canon(t.TempDir()), secret: canon(t.TempDir()),
		control: canon(t.TempDir()), tool: canon(t.TempDir())}
	if err := os.WriteFile(filepath.Join(d.secret, ".netrc"), []byte("machine x login y password z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(d.secret, filepath.Join(d.gitLink, ".git")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(d.control, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d.tool, "confine-test-tool"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("not applicable: no /bin/sh to resolve (%v)", err)
	}
	d.binDir = filepath.Dir(sh)
	d.controls = []ctlpaths.Path{{Path: filepath.Join(d.control, "keys"), What: "key directory"}}
	d.callerPATH = d.binDir + ":" + d.work + ":" + d.tool + ":/nonexistent/bin"
	return d, []runCase{
		{name: "plain work tree", prog: "sh"},
		{name: "system directory writable", rw: []string{"/usr"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "writable root"},
		{name: "system directory writable, waived", rw: []string{"/usr"}, waive: []string{spec.GFSWrite, spec.GGitPersistence}, prog: "sh"},
		{name: "credential in a writable root", rw: []string{d.secret}, prog: "sh", wantIs: spec.ErrUnavailable,
			want: filepath.Join(d.secret, ".netrc") + " is inside writable root " + d.secret + ", where it cannot be hidden from the command"},
		{name: "credential in a writable root, waived", rw: []string{d.secret}, waive: []string{spec.GCredentials}, prog: "sh"},
		{name: "control path in a writable root", rw: []string{d.control}, prog: "sh", wantIs: spec.ErrUnavailable,
			want: ControlGuarantee + ": its key directory " + filepath.Join(d.control, "keys") + " is inside writable root " + d.control},
		{name: "read-only root inside a control path", ro: []string{filepath.Join(d.control, "keys")}, prog: "sh", wantIs: spec.ErrUnavailable,
			want: "read-only root " + filepath.Join(d.control, "keys") + " lies inside its key directory"},
		{name: "a .git that is a symlink", worktree: d.gitLink, prog: "sh", wantIs: ErrGuard, want: "symlink"},
		{name: "a .git that is a symlink, waived", worktree: d.gitLink, waive: []string{spec.GGitPersistence, spec.GCredentials}, prog: "sh"},
		{name: "spec widens the network", network: spec.Allowlist, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "a spec cannot widen its profile's network"},
		{name: "refused variable", env: []string{"LD_PRELOAD=/tmp/x.so"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "LD_PRELOAD"},
		{name: "path list outside the roots", env: []string{"PYTHONPATH=/nonexistent/lib"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "PYTHONPATH"},
		{name: "program not on the run's PATH", prog: "confine-no-such-program", wantIs: spec.ErrNotFound, want: "not found in PATH"},
		{name: "program outside the roots", prog: "confine-test-tool", wantIs: spec.ErrNotFound, want: "not found in PATH", hint: "--ro " + d.tool},
		{name: "program outside the roots, granted", ro: []string{d.tool}, prog: "confine-test-tool"},
	}
}

// spec is the row's spec, with the roots it asks for.
func (c runCase) spec(d caseDirs) *spec.CommandSpec {
	wt := c.worktree
	if wt == "" {
		wt = d.work
	}
	return &spec.CommandSpec{Worktree: wt, Program: c.prog, Env: c.env, Network: c.network, ReadWrite: c.rw, ReadOnly: c.ro}
}

func (c runCase) profile() policy.Profile {
	return policy.Profile{Name: "test", Network: spec.DenyAll, Waive: c.waive}
}

// judge fails t unless err is what c wants: the refusal, with its hint,
// or none.
func (c runCase) judge(t *testing.T, err error) {
	t.Helper()
	if c.wantIs == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	if !errors.Is(err, c.wantIs) || !strings.Contains(err.Error(), c.want) {
		t.Fatalf("err = %v, want %v saying %q", err, c.wantIs, c.want)
	}
	var h *spec.Hinted
	switch {
	case c.hint == "" && errors.As(err, &h):
		t.Errorf("hinted %q, want no hint", h.Denial.Hint)
	case c.hint != "" && (!errors.As(err, &h) || h.Denial.Hint != c.hint):
		t.Errorf("err = %#v, want a hint %q", err, c.hint)
	}
}

// TestCheckRun walks the table through CheckRun, the validation Linux's
// Validate and macOS's Seatbelt launch both call, with the roots
// canonicalised as Linux does (macOS's canonicalisation is seatbelt's,
// tested there).
func TestCheckRun(t *testing.T) {
	d, cases := runCases(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.spec(d)
			r := Roots{Dir: s.Worktree, Writable: append([]string{s.Worktree}, tc.rw...), System: []string{d.binDir}, Asked: tc.ro}
			c, err := CheckRun(s, tc.profile(), r, d.controls, d.callerPATH)
			tc.judge(t, err)
			if err != nil || tc.prog != "sh" {
				return
			}
			// Accepted: PATH keeps the read-only root and drops the
			// writable and the missing components; git's system config
			// stays off; the program is the one on that PATH.
			if path := strings.Split(GetEnv(c.Env, "PATH"), ":"); !slices.Contains(path, d.binDir) || slices.Contains(path, d.work) {
				t.Errorf("PATH = %q, want %s in it and not %s", path, d.binDir, d.work)
			}
			if !slices.Contains(c.Omitted, d.work) {
				t.Errorf("omitted = %v, want the writable %s among them", c.Omitted, d.work)
			}
			if GetEnv(c.Env, "GIT_CONFIG_NOSYSTEM") != "1" {
				t.Errorf("env %v lacks GIT_CONFIG_NOSYSTEM=1", c.Env)
			}
			if c.Prog != filepath.Join(d.binDir, "sh") {
				t.Errorf("program = %q, want %s", c.Prog, filepath.Join(d.binDir, "sh"))
			}
		})
	}
}
