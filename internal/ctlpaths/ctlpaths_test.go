package ctlpaths

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func paths(ps []Path) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Path)
	}
	return out
}

// TestFind walks the rules with an environment of each shape: every
// surface a host's confine would use under it must be named; a server
// socket directory only where it exists.
func TestFind(t *testing.T) {
	d := t.TempDir()
	for _, dir := range []string{"run/confine", "tmp/confine-4242"} {
		if err := os.MkdirAll(filepath.Join(d, dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Lstat("/tmp/confine-4242"); err == nil {
		t.Skip("/tmp/confine-4242 exists on this host; the rows assume no server of uid 4242")
	}
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"home only", map[string]string{"HOME": "/h"}, []string{
			"/h/.config/confine", "/h/.local/state/confine"}},
		{"xdg set, socket dirs made", map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s", "XDG_RUNTIME_DIR": d + "/run", "TMPDIR": d + "/tmp"}, []string{
			"/c/confine", "/h/.config/confine", "/s/confine", "/h/.local/state/confine", d + "/run/confine", d + "/tmp/confine-4242"}},
		{"socket dirs not made", map[string]string{"HOME": "/h", "XDG_RUNTIME_DIR": d + "/none", "TMPDIR": d}, []string{
			"/h/.config/confine", "/h/.local/state/confine"}},
		{"relative values ignored", map[string]string{"HOME": "/h", "XDG_CONFIG_HOME": "rel", "XDG_RUNTIME_DIR": "rel", "TMPDIR": "rel", "CONFINE_EVENT_LOG": "off"}, []string{
			"/h/.config/confine", "/h/.local/state/confine"}},
		{"explicit event log", map[string]string{"HOME": "/h", "CONFINE_EVENT_LOG": "/logs/ev.jsonl"}, []string{
			"/h/.config/confine", "/h/.local/state/confine", "/logs/ev.jsonl"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := paths(Find(env(c.env), 4242)) // no such uid in the user database
			for _, w := range c.want {
				if !slices.Contains(got, w) {
					t.Errorf("missing %s in %v", w, got)
				}
			}
			if len(got) != len(c.want) {
				t.Errorf("got %v, want exactly %v", got, c.want)
			}
		})
	}
}

// TestFindUserDatabase: with no HOME at all the user database's home
// still names the directories (uid 0 has one on every Linux host).
func TestFindUserDatabase(t *testing.T) {
	got := paths(Find(nil, 0))
	if !slices.ContainsFunc(got, func(p string) bool {
		return filepath.Base(p) == "confine" && filepath.Base(filepath.Dir(p)) == ".config"
	}) {
		t.Errorf("no config directory from the user database in %v", got)
	}
}

func TestOverlapAndUnder(t *testing.T) {
	ps := Add(nil, "state", "/h/.local/state/confine")
	cases := []struct {
		root    string
		overlap bool
		under   []string
	}{
		{"/h", true, []string{"/h/.local/state/confine"}},
		{"/", true, []string{"/h/.local/state/confine"}},
		{"/h/.local/state/confine", true, nil},
		{"/h/.local/state/confine/sub", true, nil},
		{"/h/project", false, nil},
		{"/h/.local/state/confined", false, nil},
	}
	for _, c := range cases {
		if _, ok := Overlap(c.root, ps); ok != c.overlap {
			t.Errorf("Overlap(%s) = %v, want %v", c.root, ok, c.overlap)
		}
		if got := Under(c.root, ps); !slices.Equal(got, c.under) {
			t.Errorf("Under(%s) = %v, want %v", c.root, got, c.under)
		}
	}
}

// TestResolve: a symlinked home is named by both paths; a missing tail
// is kept.
func TestResolve(t *testing.T) {
	d := t.TempDir()
	real := filepath.Join(d, "real")
	if err := os.Mkdir(real, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, filepath.Join(d, "link")); err != nil {
		t.Fatal(err)
	}
	realD, _ := filepath.EvalSymlinks(real)
	got := Resolve(filepath.Join(d, "link", ".config", "confine"))
	if want := filepath.Join(realD, ".config", "confine"); got != want {
		t.Errorf("Resolve = %s, want %s", got, want)
	}
	ps := Add(nil, "config", filepath.Join(d, "link", ".config", "confine"))
	if len(ps) != 2 {
		t.Errorf("Add kept %v, want the path and its resolved form", paths(ps))
	}
}

// TestAddLog: the log's rotated files count with it, and only they.
func TestAddLog(t *testing.T) {
	d := t.TempDir()
	log := filepath.Join(d, "ev[1].jsonl")
	for _, f := range []string{"ev[1].jsonl", "ev[1].jsonl.1", "ev[1].jsonl.3", "ev[1].jsonl.bak", "other.jsonl.1"} {
		if err := os.WriteFile(filepath.Join(d, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got := paths(AddLog(nil, log))
	want := []string{log, log + ".1", log + ".3"}
	if !slices.Equal(got, want) {
		t.Errorf("AddLog = %v, want %v", got, want)
	}
}

// TestFindAll: sources naming the same paths give each once, as one
// source does; another environment adds its own.
func TestFindAll(t *testing.T) {
	h := env(map[string]string{"HOME": "/h"})
	one := paths(Find(h, 4242))
	if got := paths(FindAll(Source{h, 4242}, Source{h, 4242})); !slices.Equal(got, one) {
		t.Errorf("two identical sources: %v, one: %v", got, one)
	}
	got := paths(FindAll(Source{h, 4242}, Source{env(map[string]string{"HOME": "/other"}), 4242}))
	want := append(one, "/other/.config/confine", "/other/.local/state/confine")
	if !slices.Equal(got, want) {
		t.Errorf("two homes: %v, want %v", got, want)
	}
}

// TestUserHomeRemembered: the user database's answer is kept while its
// file is unchanged, and asked again once the file changed.
func TestUserHomeRemembered(t *testing.T) {
	f := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(f, []byte("a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := passwd
	passwd = f
	t.Cleanup(func() { passwd = old; dbHomes.Delete(0) })
	real, ok := userHome(0)
	if !ok {
		t.Skip("uid 0 has no entry in the user database here")
	}
	fi, err := os.Stat(f)
	if err != nil {
		t.Fatal(err)
	}
	dbHomes.Store(0, dbHome{file: fi, home: "/remembered", ok: true})
	if got, _ := userHome(0); got != "/remembered" {
		t.Errorf("unchanged file: userHome = %s, want the remembered answer", got)
	}
	if err := os.WriteFile(f, []byte("a longer file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := userHome(0); got != real {
		t.Errorf("changed file: userHome = %s, want %s from the database", got, real)
	}
}
