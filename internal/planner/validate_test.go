//go:build linux || darwin

package planner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

// TestSharedValidation walks one table of inputs through the checks Linux's
// validate and macOS's launch both call (this file builds on both), so the
// two refuse the same inputs with the same words.
func TestSharedValidation(t *testing.T) {
	work := t.TempDir()
	secret := t.TempDir()
	if err := os.WriteFile(filepath.Join(secret, ".netrc"), []byte("machine x login y password z\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh, err := filepath.EvalSymlinks("/bin/sh")
	if err != nil {
		t.Skipf("not applicable: no /bin/sh to resolve (%v)", err)
	}
	binDir := filepath.Dir(sh)
	ro := []string{binDir}
	tests := []struct {
		name   string
		rw     []string
		waive  []string
		env    []string
		prog   string
		wantIs error  // nil: accepted
		want   string // in the refusal
	}{
		{name: "plain work tree", rw: []string{work}, prog: "sh"},
		{name: "system directory writable", rw: []string{work, "/usr"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "writable root"},
		{name: "system directory writable, waived", rw: []string{work, "/usr"}, waive: []string{spec.GFSWrite}, prog: "sh"},
		{name: "credential in a writable root", rw: []string{work, secret}, prog: "sh", wantIs: spec.ErrUnavailable,
			want: filepath.Join(secret, ".netrc") + " is inside writable root " + secret + ", where it cannot be hidden from the command"},
		{name: "credential in a writable root, waived", rw: []string{work, secret}, waive: []string{spec.GCredentials}, prog: "sh"},
		{name: "refused variable", rw: []string{work}, env: []string{"LD_PRELOAD=/tmp/x.so"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "LD_PRELOAD"},
		{name: "path list outside the roots", rw: []string{work}, env: []string{"PYTHONPATH=/nonexistent/lib"}, prog: "sh", wantIs: spec.ErrInvalidSpec, want: "PYTHONPATH"},
		{name: "program not on the run's PATH", rw: []string{work}, prog: "confine-no-such-program", wantIs: spec.ErrNotFound, want: "not found in PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckWritableRoots(tt.rw, tt.waive)
			var env, omitted []string
			var prog string
			if err == nil {
				s := &spec.CommandSpec{Program: tt.prog, Env: tt.env}
				env, omitted, prog, err = CommandEnv(s, nil, ro, tt.rw, binDir+":"+work+":/nonexistent/bin", work)
			}
			if tt.wantIs != nil {
				if !errors.Is(err, tt.wantIs) || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("err = %v, want %v saying %q", err, tt.wantIs, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			// Accepted: PATH keeps the read-only root and drops the
			// writable and the missing components; git's system config
			// stays off; the program is the one on that PATH.
			if path := strings.Split(GetEnv(env, "PATH"), ":"); !slices.Contains(path, binDir) || slices.Contains(path, work) {
				t.Errorf("PATH = %q, want %s in it and not %s", path, binDir, work)
			}
			if !slices.Contains(omitted, work) {
				t.Errorf("omitted = %v, want the writable %s among them", omitted, work)
			}
			if GetEnv(env, "GIT_CONFIG_NOSYSTEM") != "1" {
				t.Errorf("env %v lacks GIT_CONFIG_NOSYSTEM=1", env)
			}
			if prog != filepath.Join(binDir, "sh") {
				t.Errorf("program = %q, want %s", prog, filepath.Join(binDir, "sh"))
			}
		})
	}
}
