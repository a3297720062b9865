//go:build linux

package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

// --result-fd: the command's output streams live (bytes as written) while
// the result object goes to the descriptor, carrying json_api and the
// exact kept bytes (head_base64 where they are not UTF-8); a refusal
// object goes there too.
func TestResultFD(t *testing.T) {
	if testutil.ViaServer() {
		t.Skip("--result-fd is refused with --server (the server streams into the client's descriptors); run without CONFINE_TEST_VIA_SERVER")
	}
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	want := []byte("a\xff\xfe\x00b\n")
	for _, c := range []struct {
		name     string
		args     []string
		code     int
		kind     string // a refusal's kind; "" for a result
		stdout   []byte
		exitCode int
	}{
		{"bytes", []string{"run", "--result-fd", "3", "--", "printf", `a\377\376\000b\n`}, 0, "", want, 0},
		{"status", []string{"run", "--result-fd", "3", "--", "sh", "-c", "printf x; exit 3"}, 3, "", []byte("x"), 3},
		{"refused", []string{"run", "--result-fd", "3", "--", "/nonexistent/prog"}, ExitNotFound, "not_found", nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			cmd := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Args: c.args}.Command()
			cmd.ExtraFiles = []*os.File{w}
			var out, errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			w.Close()
			got, _ := io.ReadAll(r)
			r.Close()
			err = cmd.Wait()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, errb.String())
			}
			if !bytes.Equal(out.Bytes(), c.stdout) {
				t.Errorf("live stdout %q, want %q", out.Bytes(), c.stdout)
			}
			var obj struct {
				JSONAPI int            `json:"json_api"`
				Error   map[string]any `json:"error"`
			}
			if err := json.Unmarshal(got, &obj); err != nil || obj.JSONAPI != spec.JSONAPI {
				t.Fatalf("descriptor 3 holds %q (%v), want an object with json_api %d", got, err, spec.JSONAPI)
			}
			if c.kind != "" {
				if obj.Error["kind"] != c.kind {
					t.Fatalf("refusal %v, want kind %s", obj.Error, c.kind)
				}
				return
			}
			var res spec.CommandResult
			if err := json.Unmarshal(got, &res); err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != c.exitCode || !bytes.Equal(res.Stdout.Head, c.stdout) {
				t.Errorf("result: exit %d, stdout %q; want %d, %q", res.ExitCode, res.Stdout.Head, c.exitCode, c.stdout)
			}
		})
	}
	// A descriptor that is not open, or one of the command's, is refused.
	for _, fd := range []string{"2", "9"} {
		res := cli(t, u, wd, "run", "--result-fd", fd, "--", "true")
		if res.Code != ExitConfine {
			t.Errorf("--result-fd %s: exit %d, want %d", fd, res.Code, ExitConfine)
		}
	}
}

// The version is never empty: the link-time one, the module's, the VCS
// revision, else "devel".
func TestVersionFrom(t *testing.T) {
	rev := func(kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}
		for i := 0; i+1 < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	for _, c := range []struct {
		linked string
		bi     *debug.BuildInfo
		want   string
	}{
		{"v1.2.3", rev(), "v1.2.3"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}}, "v0.4.0"},
		{"", rev("vcs.revision", "0123456789abcdef0123", "vcs.modified", "false"), "devel+0123456789ab"},
		{"", rev("vcs.revision", "0123456789abcdef0123", "vcs.modified", "true"), "devel+0123456789ab-dirty"},
		{"", rev(), "devel"},
		{"", &debug.BuildInfo{}, "devel"},
		{"", nil, "devel"},
	} {
		if got := versionFrom(c.linked, c.bi); got != c.want {
			t.Errorf("versionFrom(%q, %+v) = %q, want %q", c.linked, c.bi, got, c.want)
		}
	}
	// The binary's own: `--version` and `version` print the same version,
	// and it is not empty.
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	r := cli(t, u, wd, "--version")
	v, ok := strings.CutPrefix(strings.TrimSuffix(r.Stdout, "\n"), "confine ")
	if r.Code != 0 || !ok || strings.TrimSpace(v) == "" || strings.ContainsAny(v, " \n") {
		t.Fatalf("--version: exit %d, %q: want \"confine VERSION\" with a non-empty VERSION", r.Code, r.Stdout)
	}
	if r := cli(t, u, wd, "version"); r.Code != 0 || !strings.HasPrefix(r.Stdout, "confine "+v+" (backends ") {
		t.Errorf("version: exit %d, %q; want the version --version printed, %q", r.Code, r.Stdout, v)
	}
	t.Logf("confine --version: %s", v)
}

// Shell completion offers --profile's built-in names and --backend's
// values.
func TestCompletionValues(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	for _, c := range []struct {
		flag string
		want []string
	}{
		{"--profile", []string{"default", "go", "python"}},
		{"--backend", backendValues},
	} {
		r := cli(t, u, wd, "__complete", "run", c.flag, "")
		if r.Code != 0 {
			t.Fatalf("__complete run %s: exit %d, %s", c.flag, r.Code, r.Stderr)
		}
		lines := strings.Split(r.Stdout, "\n")
		for _, w := range c.want {
			if !slices.Contains(lines, w) {
				t.Errorf("completion of %s lacks %q:\n%s", c.flag, w, r.Stdout)
			}
		}
	}
}

// Tier 1 results carry json_api too, first, with the result's fields.
func TestTier1JSONAPI(t *testing.T) {
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	if err := os.WriteFile(wd+"/a.txt", []byte("<a>\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"fs", "read", "--root", wd, "--json", "a.txt"}, {"fs", "ls", "--root", wd, "--json"}} {
		r := cli(t, u, wd, args...)
		var v map[string]any
		if err := json.Unmarshal([]byte(r.Stdout), &v); err != nil || r.Code != 0 {
			t.Fatalf("%v: exit %d, %q (%v)", args, r.Code, r.Stdout, err)
		}
		if v["json_api"] != float64(spec.JSONAPI) || len(v) < 2 || !strings.HasPrefix(r.Stdout, "{\n  \"json_api\": ") {
			t.Errorf("%v: %s; want json_api %d first, with the result", args, r.Stdout, spec.JSONAPI)
		}
	}
}
