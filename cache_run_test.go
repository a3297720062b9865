//go:build linux

package confine_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine"
	"github.com/confine-sandbox/confine/policy"
	"github.com/confine-sandbox/confine/spec"
)

// The go recipe's build cache survives the run, in confine's cache
// directory for this work directory; a run can write inside it but cannot
// replace it (by a symlink a later run would follow into a grant) or
// write beside it.
func TestWarmCacheKeptAndContained(t *testing.T) {
	base := t.TempDir()
	t.Setenv("CONFINE_CACHE_DIR", base)
	_, c, err := mintErr("go")
	if err != nil {
		t.Skipf("not applicable here: the go recipe: %v", err)
	}
	wt := worktree(t)
	run := func(script string) spec.CommandResult {
		t.Helper()
		s := shSpec(wt, script)
		res, err := confine.RunCommand(context.Background(), c, s)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// go itself takes it (a cold build would cost a minute here: an
	// entry written into it stands for what go writes).
	res := run(`go env GOCACHE && echo entry > "$GOCACHE/entry"`)
	if res.ExitCode != 0 || len(res.Caches) != 1 {
		t.Fatalf("build: exit %d, caches %v\nstderr: %s", res.ExitCode, res.Caches, res.Stderr.Text())
	}
	dir := strings.TrimPrefix(res.Caches[0], "GOCACHE=")
	if !strings.HasPrefix(dir, base+"/") || !strings.Contains(res.Stdout.Text(), dir) {
		t.Fatalf("GOCACHE %q (stdout %q) is not under %s", dir, res.Stdout.Text(), base)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "entry")); err != nil || string(b) != "entry\n" {
		t.Fatalf("what the run wrote into its cache: %q, %v", b, err)
	}

	// The attack: take the cache's place, or plant something beside it.
	res = run(`mv "$GOCACHE" "$GOCACHE.old" && echo moved; ln -s / "$GOCACHE.link" && echo linked; mkdir "$GOCACHE/../planted" && echo planted; touch "$GOCACHE/mine" && echo wrote-inside`)
	if out := res.Stdout.Text(); strings.Contains(out, "moved") || strings.Contains(out, "linked") || strings.Contains(out, "planted") || !strings.Contains(out, "wrote-inside") {
		t.Fatalf("a run changed what holds its cache, or could not write in it: %q", out)
	}
	if st, err := os.Lstat(dir); err != nil || !st.IsDir() {
		t.Fatalf("the cache directory after the attack: %v, %v", st, err)
	}
	for _, p := range []string{filepath.Join(filepath.Dir(dir), "planted"), dir + ".old", dir + ".link"} {
		if _, err := os.Lstat(p); err == nil {
			t.Fatalf("%s exists beside the cache", p)
		}
	}
	// The next run still gets it, warm.
	res = run(`cat "$GOCACHE/entry"`)
	if res.ExitCode != 0 || res.Stdout.Text() != "entry\n" || len(res.Caches) != 1 || strings.TrimPrefix(res.Caches[0], "GOCACHE=") != dir {
		t.Fatalf("next run: exit %d, stdout %q, caches %v", res.ExitCode, res.Stdout.Text(), res.Caches)
	}
}

func mintErr(profile string) (any, *policy.Cap, error) {
	e, err := policy.NewEngine()
	if err != nil {
		return nil, nil, err
	}
	c, err := e.Mint(profile, "test", 0)
	return e, c, err
}
