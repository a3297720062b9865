package policy

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

// pathTree makes ro (a read root), rw (a writable root) and outside (not a
// root) with a few directories and symlinks, and returns the base.
func pathTree(t *testing.T) string {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ro/bin", "ro/lib", "ro/java", "rw/bin", "outside/bin", "ro/rwinside"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"ro/lib/libx.so", "ro/java/a.jar"} {
		if err := os.WriteFile(filepath.Join(base, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"ro/link-out": filepath.Join(base, "outside/bin"),
		"ro/link-in":  filepath.Join(base, "ro/bin"),
		"ro/link-rw":  filepath.Join(base, "rw/bin"),
		"ro/dangling": filepath.Join(base, "ro/nope"),
	}
	for l, target := range links {
		if err := os.Symlink(target, filepath.Join(base, l)); err != nil {
			t.Fatal(err)
		}
	}
	return base
}

func TestValidateEnvPaths(t *testing.T) {
	b := pathTree(t)
	ro := []string{b + "/ro"}
	rw := []string{b + "/rw", b + "/ro/rwinside"}
	tests := []struct {
		name string
		env  []string
		errs []string // substrings; nil = valid
	}{
		{"good PATH", []string{"PATH=" + b + "/ro/bin:" + b + "/ro/lib"}, nil},
		{"not a path list", []string{"HOME=relative", "GOCACHE=:x"}, nil},
		{"symlink inside roots", []string{"PATH=" + b + "/ro/link-in"}, nil},
		{"empty component", []string{"PATH=:" + b + "/ro/bin"}, []string{"PATH: empty component"}},
		{"trailing colon", []string{"PYTHONPATH=" + b + "/ro/lib:"}, []string{"PYTHONPATH: empty component"}},
		{"empty value", []string{"NODE_PATH="}, []string{"NODE_PATH: empty component"}},
		{"relative", []string{"PATH=" + b + "/ro/bin:bin"}, []string{"PATH", `"bin" is relative`}},
		{"dot", []string{"PERL5LIB=."}, []string{"PERL5LIB", `"." is relative`}},
		{"unnormalised", []string{"RUBYLIB=" + b + "/ro/bin/../lib"}, []string{"RUBYLIB", "not normalised"}},
		{"trailing slash", []string{"GOPATH=" + b + "/ro/"}, []string{"GOPATH", "not normalised"}},
		{"NUL", []string{"CLASSPATH=" + b + "/ro\x00"}, []string{"CLASSPATH", "NUL"}},
		{"outside read roots", []string{"PATH=" + b + "/ro/bin:" + b + "/outside/bin"}, []string{"PATH", b + "/outside/bin", "outside the read roots"}},
		{"writable root", []string{"PATH=" + b + "/rw/bin:" + b + "/ro/bin"}, []string{"PATH", b + "/rw/bin", "writable by the run"}},
		{"writable inside read root", []string{"PKG_CONFIG_PATH=" + b + "/ro/rwinside"}, []string{"PKG_CONFIG_PATH", "writable"}},
		{"symlink escaping", []string{"PATH=" + b + "/ro/link-out"}, []string{"PATH", "link-out", "resolves to"}},
		{"symlink into writable", []string{"LIBRARY_PATH=" + b + "/ro/link-rw"}, []string{"LIBRARY_PATH", "resolves to"}},
		{"dangling symlink", []string{"CPATH=" + b + "/ro/dangling"}, []string{"CPATH", "does not resolve"}},
		{"missing dir", []string{"MANPATH=" + b + "/ro/none"}, []string{"MANPATH", "does not resolve"}},
		{"classpath wildcard", []string{"CLASSPATH=" + b + "/ro/java/*:" + b + "/ro/java/a.jar"}, nil},
		{"classpath wildcard outside", []string{"CLASSPATH=" + b + "/outside/*"}, []string{"CLASSPATH", "outside the read roots"}},
		{"ld_preload spaces", []string{"LD_PRELOAD=" + b + "/ro/lib/libx.so  " + b + "/ro/lib/libx.so"}, nil},
		{"ld_preload relative", []string{"LD_PRELOAD=libx.so"}, []string{"LD_PRELOAD", "relative"}},
		{"ld_library_path empty", []string{"LD_LIBRARY_PATH=" + b + "/ro/lib::"}, []string{"LD_LIBRARY_PATH: empty component"}},
		{"every bad variable named", []string{"PATH=x", "LANG=C", "PYTHONPATH=" + b + "/rw"}, []string{"PATH:", "PYTHONPATH:"}},
		{"name is case-sensitive", []string{"path=relative"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateEnvPaths(tt.env, ro, rw)
			if tt.errs == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
			for _, s := range tt.errs {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestPathListComponents(t *testing.T) {
	tests := []struct {
		name, value string
		want        []string
	}{
		{"PATH", "/a:/b", []string{"/a", "/b"}},
		{"PATH", "", []string{""}},
		{"PATH", "/a::/b", []string{"/a", "", "/b"}},
		{"LD_PRELOAD", "/a.so /b.so:/c.so", []string{"/a.so", "/b.so", "/c.so"}},
		{"LD_PRELOAD", " : ", []string{""}},
		{"CLASSPATH", "/j/*:/k.jar:*", []string{"/j", "/k.jar", "*"}},
		{"PYTHONPATH", "/j/*", []string{"/j/*"}},
	}
	for _, tt := range tests {
		if got := pathListComponents(tt.name, tt.value); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("pathListComponents(%s, %q) = %q, want %q", tt.name, tt.value, got, tt.want)
		}
	}
	for _, v := range []string{"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "NODE_PATH", "CLASSPATH", "PERL5LIB", "RUBYLIB", "GOPATH"} {
		if !isPathListVar(v) {
			t.Errorf("%s is not a path-list variable", v)
		}
	}
	if isPathListVar("GOCACHE") || isPathListVar("path") {
		t.Error("GOCACHE or path taken for a path list")
	}
}
