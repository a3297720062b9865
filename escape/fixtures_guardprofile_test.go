//go:build linux

package escape

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	fx "github.com/confine-sandbox/confine/internal/fixture"
	"github.com/confine-sandbox/confine/internal/testutil"
)

// guardProfile is a profile file that changes the persistence guard's set
// ([guard], docs/guard.md): .envrc moved to refused, git's hooks moved to
// reported (a waiver of no-git-persistence), a refused row of its own
// (any Makefile) and a reported one (ci/run.sh at the top level).
var guardProfile = testutil.GuardProfile("guard-changes", "", "envrc")

// guardProfileVectors attack the entries a profile's [guard] refuses, in
// a git work tree, and write those it reports: a write to a refused one
// must fail under every backend (the default, the core, bubblewrap in
// TestEscapeBwrap), and a write to a reported one must be in the run's
// persistence report (the row's judge: escaped = written and not
// reported). Each control writes unconfined.
func guardProfileVectors() []vcase {
	// tree makes e.wd a work tree with the entries, and the profile
	// file beside it (never inside what the command writes).
	tree := func(e *env) (prof string) {
		for _, f := range []string{".git/config", ".git/HEAD", "src/main.c", "src/Makefile", ".envrc", "ci/run.sh"} {
			e.file(e.wd, f, 0o644)
		}
		e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
		dir := e.freshDir("guard-profile-")
		prof = filepath.Join(dir, "guard-changes.toml")
		if err := os.WriteFile(prof, []byte(guardProfile), 0o644); err != nil {
			e.t.Fatal(err)
		}
		return prof
	}
	// reported judges a reported row: escaped when the file changed and
	// the run's report (stderr) does not name it.
	reported := func(effect fx.Effect, rel string) func(o outcome) (bool, string) {
		return func(o outcome) (bool, string) {
			ok, d := effect()
			if !ok {
				return false, "not written: " + d
			}
			for _, l := range strings.Split(o.stderr, "\n") {
				if strings.HasPrefix(l, "confine: the command ") && strings.Contains(l, " "+rel+" (") {
					return false, "written and reported: " + l
				}
			}
			return true, "written, not reported: " + d
		}
	}
	rows := []vcase{
		{name: "guard-profile-added-refused-write", vector: "append-file", setup: func(e *env) fixture {
			prof := tree(e)
			mk := filepath.Join(e.wd, "src", "Makefile")
			return fixture{args: []string{mk}, cliArgs: []string{"--profile", prof}, effect: contentChanged(mk), mustReport: true}
		}},
		{name: "guard-profile-moved-refused-write", vector: "append-file", setup: func(e *env) fixture {
			prof := tree(e)
			rc := filepath.Join(e.wd, ".envrc")
			return fixture{args: []string{rc}, cliArgs: []string{"--profile", prof}, effect: contentChanged(rc), mustReport: true}
		}},
		{name: "guard-profile-moved-reported-write", vector: "write-file", setup: func(e *env) fixture {
			prof := tree(e)
			hook := filepath.Join(e.wd, ".git", "hooks", "post-checkout")
			return fixture{args: []string{hook}, cliArgs: []string{"--profile", prof}, judge: reported(fx.Exists(hook), ".git/hooks/post-checkout")}
		}},
		{name: "guard-profile-added-reported-write", vector: "append-file", setup: func(e *env) fixture {
			prof := tree(e)
			ci := filepath.Join(e.wd, "ci", "run.sh")
			return fixture{args: []string{ci}, cliArgs: []string{"--profile", prof}, judge: reported(contentChanged(ci), "ci/run.sh")}
		}},
	}
	all := make([]vcase, 0, 2*len(rows))
	for _, r := range rows {
		c := r
		c.name += "-core"
		setup := r.setup
		c.setup = func(e *env) fixture {
			f := setup(e)
			if e.confined && e.backend == "" {
				f.cliArgs = append(f.cliArgs, "--backend", "core")
			}
			return f
		}
		all = append(all, r, c)
	}
	return all
}

// TestGuardProfileWaiverInResult: a profile that moves a git row to
// reported waives no-git-persistence, and the run's result says so (its
// guarantees: waived, no mechanism claimed); one that only moves an
// editor row keeps the guarantee. As root and 65534.
func TestGuardProfileWaiverInResult(t *testing.T) {
	for _, u := range testutil.Users(t) {
		t.Run(u.Name, func(t *testing.T) {
			for _, c := range []struct {
				profile string
				waived  bool
			}{
				{guardProfile, true},
				{"name = \"guard-editor\"\n[guard]\nrefuse = [\"envrc\"]\n", false},
			} {
				wd := testutil.Workdir(t, u.UID)
				e := &env{t: t, user: u, confined: true, wd: wd}
				e.file(wd, ".git/HEAD", 0o644)
				prof := filepath.Join(e.freshDir("guard-profile-"), "p.toml")
				if err := os.WriteFile(prof, []byte(c.profile), 0o644); err != nil {
					t.Fatal(err)
				}
				o := cliRun(t, u, wd, nil, "run", "--json", "--workdir", wd, "--profile", prof, "--", "true")
				var res struct {
					Guarantees []struct {
						Name      string `json:"name"`
						Waived    bool   `json:"waived"`
						Mechanism string `json:"mechanism"`
					} `json:"guarantees"`
				}
				if err := json.Unmarshal([]byte(o.stdout), &res); err != nil || o.code != 0 {
					t.Fatalf("run (exit %d): %v\n%s\n%s", o.code, err, o.stdout, o.stderr)
				}
				i := slices.IndexFunc(res.Guarantees, func(g struct {
					Name      string `json:"name"`
					Waived    bool   `json:"waived"`
					Mechanism string `json:"mechanism"`
				}) bool {
					return g.Name == "no-git-persistence"
				})
				if i < 0 {
					t.Fatalf("no no-git-persistence in the result's guarantees: %s", o.stdout)
				}
				g := res.Guarantees[i]
				if g.Waived != c.waived || (g.Waived && g.Mechanism != "") {
					t.Fatalf("profile %q: no-git-persistence %+v, want waived %v (no mechanism when waived)", c.profile, g, c.waived)
				}
			}
		})
	}
}
