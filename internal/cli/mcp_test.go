//go:build linux

package cli

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
)

// TestMCPExecs: this package's binary, like cmd/confine, links no MCP
// server (NewMCPServer is nil), so `confine mcp` executes confine-mcp,
// beside the binary first, then in PATH, with its arguments and
// environment; without one it says how to build it.
func TestMCPExecs(t *testing.T) {
	if NewMCPServer != nil {
		t.Fatal("this test binary links an MCP server; the test needs one without")
	}
	// A stand-in confine-mcp that reports how it was started.
	const script = "#!/bin/sh\necho \"$(basename \"$0\") $* mark=$CONFINE_TEST_MARK\"\n"
	cases := []struct {
		name          string
		beside, inDir bool
		wantCode      int
		wantOut       string
		wantErr       string
	}{
		{name: "beside", beside: true, wantOut: "confine-mcp mcp --no-run --root /x mark=m1\n"},
		{name: "in PATH", inDir: true, wantOut: "confine-mcp mcp --no-run --root /x mark=m1\n"},
		{name: "beside first", beside: true, inDir: true, wantOut: "confine-mcp mcp --no-run --root /x mark=m1\n"},
		{name: "missing", wantCode: ExitConfine, wantErr: "has no MCP server and confine-mcp is neither beside it nor in PATH"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			binDir, pathDir := t.TempDir(), t.TempDir()
			bin := filepath.Join(binDir, "confine")
			if err := testutil.CopyFile(testutil.SelfBinary(t), bin, 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.beside {
				if err := os.WriteFile(filepath.Join(binDir, MCPBinary), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.inDir {
				// With a copy beside too, the PATH copy marks its output
				// differently: were it run instead, the mark would differ.
				pathScript := script
				if tc.beside {
					pathScript = strings.Replace(script, "mark=", "mark=path-", 1)
				}
				if err := os.WriteFile(filepath.Join(pathDir, MCPBinary), []byte(pathScript), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command(bin, "mcp", "--no-run", "--root", "/x")
			cmd.Env = []string{testutil.CLIEnv + "=1", "PATH=" + pathDir + ":/usr/bin:/bin", "CONFINE_TEST_MARK=m1", "CONFINE_EVENT_LOG=off"}
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stderr: %s", code, tc.wantCode, stderr.String())
			}
			if stdout.String() != tc.wantOut {
				t.Errorf("stdout %q, want %q", stdout.String(), tc.wantOut)
			}
			if !strings.Contains(stderr.String(), tc.wantErr) {
				t.Errorf("stderr %q, want it to contain %q", stderr.String(), tc.wantErr)
			}
		})
	}
}
