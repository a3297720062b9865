//go:build linux

package confine_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/spec"
)

// A profile with warm caches gets the same $HOME and $TMPDIR paths at
// every run in one work directory: HOME keeps what the last run left,
// TMPDIR starts empty, the run cannot replace either (by a symlink a later
// run would follow), and another work directory, or a run while another
// holds them, gets its own.
func TestStablePrivateDir(t *testing.T) {
	base := t.TempDir()
	t.Setenv("CONFINE_CACHE_DIR", base)
	_, c, err := mintErr("go")
	if err != nil {
		t.Skipf("not applicable here: the go recipe: %v", err)
	}
	run := func(wt, script string) spec.CommandResult {
		t.Helper()
		res, err := confine.RunCommand(context.Background(), c, shSpec(wt, script))
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout.Text(), res.Stderr.Text())
		}
		return res
	}
	paths := `echo "$HOME $TMPDIR"`
	wt := worktree(t)
	first := run(wt, paths+`; echo rc > "$HOME/rc"; echo left > "$TMPDIR/left"
mv "$HOME" "$HOME.old" 2>/dev/null && echo moved; ln -s / "$TMPDIR/../planted" 2>/dev/null && echo planted; chmod 755 "$HOME/.." 2>/dev/null && echo opened; true`)
	out := first.Stdout.Text()
	if strings.Contains(out, "moved") || strings.Contains(out, "planted") || strings.Contains(out, "opened") {
		t.Fatalf("a run changed what holds its HOME and TMPDIR: %q", out)
	}
	homeTmp := strings.SplitN(out, "\n", 2)[0]
	home, tmp, _ := strings.Cut(homeTmp, " ")
	if !strings.HasPrefix(home, base+"/") || !strings.HasPrefix(tmp, base+"/") {
		t.Fatalf("HOME %q and TMPDIR %q are not in confine's cache directory %s", home, tmp, base)
	}
	if st, err := os.Stat(filepath.Dir(home)); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("the stable directory %s: %v, %v; want mode 0700", filepath.Dir(home), st, err)
	}

	second := run(wt, paths+`; cat "$HOME/rc"; ls -A "$TMPDIR" | grep -v gocacheprog; true`)
	if got, want := second.Stdout.Text(), homeTmp+"\nrc\n"; got != want {
		t.Fatalf("second run in the same work directory printed %q, want %q (same paths, HOME kept, TMPDIR empty but for the launcher's GOCACHEPROG relay)", got, want)
	}

	other := run(worktree(t), paths)
	if strings.TrimSpace(other.Stdout.Text()) == homeTmp {
		t.Fatalf("another work directory got the same HOME and TMPDIR: %q", homeTmp)
	}

	// A run while another holds the directory gets its own.
	stop := filepath.Join(wt, "stop")
	held := make(chan spec.CommandResult, 1)
	go func() {
		res, _ := confine.RunCommand(context.Background(), c, shSpec(wt, `touch started; while [ ! -e stop ]; do sleep 0.05; done; `+paths))
		held <- res
	}()
	for i := 0; ; i++ {
		if _, err := os.Stat(filepath.Join(wt, "started")); err == nil {
			break
		}
		if i == 6000 {
			t.Fatal("the holding run never started")
		}
		_ = exec.Command("sleep", "0.01").Run()
	}
	meanwhile := run(wt, paths)
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	h := <-held
	if strings.TrimSpace(h.Stdout.Text()) != homeTmp || strings.TrimSpace(meanwhile.Stdout.Text()) == homeTmp {
		t.Fatalf("the holder got %q, the run meanwhile %q: want the stable %q for the holder only", h.Stdout.Text(), meanwhile.Stdout.Text(), homeTmp)
	}
}

// The point of it: a second `go test` of the go profile in one work
// directory is a cache hit, as it is unconfined.
func TestGoTestCachedConfined(t *testing.T) {
	t.Setenv("CONFINE_CACHE_DIR", t.TempDir())
	_, c, err := mintErr("go")
	if err != nil {
		t.Skipf("not applicable here: the go recipe: %v", err)
	}
	wt := worktree(t)
	files := map[string]string{
		"go.mod":    "module example.com/m\n\ngo 1.21\n",
		"m.go":      "package m\n\nfunc Double(x int) int { return 2 * x }\n",
		"m_test.go": "package m\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\nfunc TestDouble(t *testing.T) {\n\t_ = t.TempDir()\n\t_, _ = os.UserHomeDir()\n\tif Double(2) != 4 {\n\t\tt.Fatal(\"Double(2) != 4\")\n\t}\n}\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(wt, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gotest := func() string {
		t.Helper()
		s := spec.CommandSpec{Program: "go", Args: []string{"test", "./..."}, Worktree: wt}
		res, err := confine.RunCommand(context.Background(), c, s)
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("go test: exit %d\nstdout: %s\nstderr: %s", res.ExitCode, res.Stdout.Text(), res.Stderr.Text())
		}
		return res.Stdout.Text()
	}
	if out := gotest(); strings.Contains(out, "(cached)") {
		t.Fatalf("first go test in a fresh cache said cached: %q", out)
	}
	if out := gotest(); !strings.Contains(out, "(cached)") {
		t.Fatalf("second go test was not a cache hit: %q", out)
	}
}

// A work directory that holds confine's cache directory (the home
// directory, say) gets no stable directory and no warm caches: the run
// could replace them, or plant in other work directories'.
func TestStablePrivateDirNotInsideWorkdir(t *testing.T) {
	wt := worktree(t)
	t.Setenv("CONFINE_CACHE_DIR", filepath.Join(wt, "cache"))
	_, c, err := mintErr("go")
	if err != nil {
		t.Skipf("not applicable here: the go recipe: %v", err)
	}
	res, err := confine.RunCommand(context.Background(), c, shSpec(wt, `echo "$HOME"`))
	if err != nil {
		t.Fatal(err)
	}
	if home := strings.TrimSpace(res.Stdout.Text()); res.ExitCode != 0 || strings.HasPrefix(home, wt+"/") {
		t.Fatalf("exit %d, HOME %q: want a private directory of the run's own, outside the work directory %s", res.ExitCode, home, wt)
	}
	// Nor warm caches there: the run could plant in every work
	// directory's.
	if len(res.Caches) != 0 {
		t.Fatalf("caches %v inside the work directory %s", res.Caches, wt)
	}
}
