//go:build linux || darwin

package cli

import (
	"errors"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestServerArgument walks the ways to write --server and checks which
// socket and which program each one means, and that the ambiguous one is
// refused before anything is dialled or run.
func TestServerArgument(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "s") // a live socket without the .sock suffix
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Skipf("cannot create a unix socket in %s (%v): the existing-socket rule is untestable here", dir, err)
	}
	defer ln.Close()
	missing := filepath.Join(dir, "nothing-here")
	tests := []struct {
		name   string
		argv   []string // after `run`
		server string   // the --server value afterwards
		args   []string // the program and its arguments
		json   bool     // --json parsed
		err    string   // refused, with this in the message
	}{
		{"alone, then --", []string{"--server", "--", "make", "test"}, "default", []string{"make", "test"}, false, ""},
		{"alone, program without --", []string{"--server", "make", "test"}, "default", []string{"make", "test"}, false, ""},
		{"alone, program whose args hold --", []string{"--server", "--", "git", "--", "f"}, "default", []string{"git", "--", "f"}, false, ""},
		{"= form", []string{"--server=/a/x.sock", "--", "true"}, "/a/x.sock", []string{"true"}, false, ""},
		{"= form, a .sock program after it stays the program", []string{"--server=/a/x.sock", "/b/y.sock", "--", "true"}, "/a/x.sock", []string{"/b/y.sock", "--", "true"}, false, ""},
		{"space, .sock path", []string{"--server", "/run/user/1/confine/serve.sock", "--", "true"}, "/run/user/1/confine/serve.sock", []string{"true"}, false, ""},
		{"space, relative .sock path, no --", []string{"--server", "my.sock", "echo", "hi"}, "my.sock", []string{"echo", "hi"}, false, ""},
		{"space, live socket, flags after it", []string{"--server", sock, "--json", "--", "true"}, sock, []string{"true"}, true, ""},
		{"space, flags before it too", []string{"--json", "--server", sock, "--workdir", dir, "--", "sh", "-c", "x"}, sock, []string{"sh", "-c", "x"}, true, ""},
		{"space, socket but no program", []string{"--server", sock}, "", nil, false, "needs a PROGRAM"},
		{"space, socket then a bad flag", []string{"--server", sock, "--no-such-flag", "--", "true"}, "", nil, false, "no-such-flag"},
		{"space, missing path then --: ambiguous", []string{"--server", missing, "--", "true"}, "", nil, false, "--server=" + missing},
		{"space, program then --: ambiguous", []string{"--server", "git", "--", "f"}, "", nil, false, "--server -- git f"},
		{"no --server: a .sock first argument is the program", []string{"x.sock", "--", "true"}, "", []string{"x.sock", "--", "true"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newRun(io.Discard, io.Discard).Flags()
			if err := f.Parse(tt.argv); err != nil {
				t.Fatalf("parse: %v", err)
			}
			args, err := serverArgument(f, f.Args())
			if tt.err != "" {
				var ee *exitError
				if err == nil || !strings.Contains(err.Error(), tt.err) || !errors.As(err, &ee) || ee.code != ExitConfine {
					t.Fatalf("got %q, %v; want exit %d refusal mentioning %q", args, err, ExitConfine, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if got := f.Lookup("server").Value.String(); got != tt.server {
				t.Errorf("server %q, want %q", got, tt.server)
			}
			if !slices.Equal(args, tt.args) {
				t.Errorf("args %q, want %q", args, tt.args)
			}
			if got := f.Lookup("json").Value.String() == "true"; got != tt.json {
				t.Errorf("--json %v, want %v", got, tt.json)
			}
		})
	}
}
