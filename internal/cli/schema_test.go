//go:build linux

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/confine-sandbox/confine/internal/host"
	"github.com/confine-sandbox/confine/internal/testutil"
	"github.com/confine-sandbox/confine/spec"
)

const resultSchema = "../../schema/result.schema.json"

func compileResultSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	abs, err := filepath.Abs(resultSchema)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.AssertContent()
	sch, err := c.Compile(abs)
	if err != nil {
		t.Fatalf("%s: %v", resultSchema, err)
	}
	return sch
}

func validate(sch *jsonschema.Schema, doc string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// Real `confine run --json` output, results and refusals, validates
// against schema/result.schema.json; what the schema forbids is refused.
func TestResultSchema(t *testing.T) {
	sch := compileResultSchema(t)
	u := testutil.Users(t)[0]
	wd := testutil.Workdir(t, u.UID)
	notExec := filepath.Join(wd, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(notExec, u.UID, u.UID); err != nil && os.Geteuid() == 0 {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  []string
		code int
		// want is a field the output must hold (what the case is for).
		want string
	}{
		{"ok", []string{"true"}, nil, 0, `"exit_code":0`},
		{"no-memory-cgroup", []string{"true"}, []string{host.NoMemoryCgroupEnv + "=1"}, 0, `"memory_bound":"memory-watch"`},
		{"status", []string{"sh", "-c", "exit 3"}, nil, 3, `"exit_code":3`},
		{"signal", []string{"sh", "-c", "kill -KILL $$"}, nil, 137, `"signal":9`},
		{"binary-truncated", []string{"--output-limit", "64", "--", "sh", "-c", `printf '\377'; head -c 4096 /dev/zero; printf '\376'`}, nil, 0, `"tail_base64"`},
		{"denial", []string{"chmod", "644", "/etc/passwd"}, nil, 1, `"denials"`},
		{"timeout", []string{"--timeout", "300ms", "--", "sleep", "30"}, nil, ExitTimeout, `"timed_out":true`},
		{"not-found", []string{"/nonexistent/prog"}, nil, ExitNotFound, `"kind":"not_found"`},
		{"not-executable", []string{notExec}, nil, ExitNotExecutable, `"kind":"not_executable"`},
		{"bad-profile", []string{"--profile", "/nonexistent/profile.toml", "--", "true"}, nil, ExitConfine, `"kind":`},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"run", "--json"}, c.args...)
			if c.args[0] != "--output-limit" && c.args[0] != "--timeout" && c.args[0] != "--profile" {
				args = append([]string{"run", "--json", "--"}, c.args...)
			}
			r := testutil.CLI{Bin: testutil.SelfBinary(t), UID: u.UID, Dir: wd, Env: c.env, Args: args}.Run(t)
			if r.Code != c.code {
				t.Fatalf("exit %d, want %d; stdout %s stderr %s", r.Code, c.code, r.Stdout, r.Stderr)
			}
			if !strings.Contains(r.Stdout, c.want) {
				t.Fatalf("output lacks %s: %s", c.want, r.Stdout)
			}
			if err := validate(sch, r.Stdout); err != nil {
				t.Fatalf("%s does not validate: %v\n%s", resultSchema, err, r.Stdout)
			}
		})
	}
	// The schema is not vacuous: what it forbids is refused.
	ok := cli(t, u, wd, "run", "--json", "--", "true").Stdout
	var m map[string]any
	if err := json.Unmarshal([]byte(ok), &m); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name   string
		change func(map[string]any)
	}{
		{"no json_api", func(m map[string]any) { delete(m, "json_api") }},
		{"old json_api", func(m map[string]any) { m["json_api"] = 3 }},
		{"unknown field", func(m map[string]any) { m["surprise"] = true }},
		{"stream without head", func(m map[string]any) { delete(m["stdout"].(map[string]any), "head") }},
		{"bad base64", func(m map[string]any) { m["stdout"].(map[string]any)["head_base64"] = "!!" }},
		{"guarantee without mechanism", func(m map[string]any) { m["guarantees"] = []any{map[string]any{"name": "x"}} }},
	} {
		var c map[string]any
		b, _ := json.Marshal(m)
		_ = json.Unmarshal(b, &c)
		bad.change(c)
		b, _ = json.Marshal(c)
		if err := validate(sch, string(b)); err == nil {
			t.Errorf("%s: validates, want a refusal: %s", bad.name, b)
		}
	}
}

// Every JSON field of spec.CommandResult and the types inside it is
// named in the schema, and only those: a field added to the Go side must
// be described (the schema refuses unknown fields).
func TestResultSchemaNamesEveryField(t *testing.T) {
	b, err := os.ReadFile(resultSchema)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]struct {
			Properties map[string]json.RawMessage `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		def   string
		typ   reflect.Type
		extra []string // written by a MarshalJSON, not a tag
	}{
		{"result", reflect.TypeFor[spec.CommandResult](), nil},
		{"stream", reflect.TypeFor[spec.Stream](), []string{"head_base64", "tail_base64"}},
		{"usage", reflect.TypeFor[spec.Usage](), nil},
		{"guarantee", reflect.TypeFor[spec.Guarantee](), nil},
		{"denial", reflect.TypeFor[spec.Denial](), nil},
		{"persistence", reflect.TypeFor[spec.Persistence](), nil},
		{"skipped_backend", reflect.TypeFor[spec.SkippedBackend](), nil},
		{"connection", reflect.TypeFor[spec.Connection](), nil},
	} {
		want := slices.Clone(c.extra)
		for i := 0; i < c.typ.NumField(); i++ {
			name, _, _ := strings.Cut(c.typ.Field(i).Tag.Get("json"), ",")
			if name != "" && name != "-" {
				want = append(want, name)
			}
		}
		var got []string
		for k := range doc.Defs[c.def].Properties {
			got = append(got, k)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("schema $defs/%s names %v\n%s has %v", c.def, got, c.typ, want)
		}
	}
}
