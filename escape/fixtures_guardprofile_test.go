//go:build linux

package escape

import (
	"encoding/json"
	"fmt"
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

// reportProfile is guardProfile's reported rows alone: it refuses no row
// besides git's, so bubblewrap runs it too.
const reportProfile = `name = "guard-report"
[guard]
report = ["git-hooks"]
[guard.add.ci]
pattern = "ci/run.sh"
action = "report"
`

// guardProfileVectors attack the entries a profile's [guard] refuses, in
// a git work tree, and write those it reports: a write to a refused one
// must fail under every backend (the default, the core, bubblewrap in
// TestEscapeBwrap), and a write to a reported one must be in the run's
// persistence report (the row's judge: escaped = written and not
// reported). Each control writes unconfined.
func guardProfileVectors() []vcase {
	// tree makes e.wd a work tree with the entries, and the profile
	// file beside it (never inside what the command writes).
	tree := func(e *env, profile ...string) (prof string) {
		text := guardProfile
		if len(profile) > 0 {
			text = profile[0]
		}
		for _, f := range []string{".git/config", ".git/HEAD", "src/main.c", "src/Makefile", ".envrc", "ci/run.sh"} {
			e.file(e.wd, f, 0o644)
		}
		e.file(e.wd, ".git/hooks/pre-commit.sample", 0o755)
		dir := e.freshDir("guard-profile-")
		prof = filepath.Join(dir, "guard-changes.toml")
		if err := os.WriteFile(prof, []byte(text), 0o644); err != nil {
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
			prof := tree(e, reportProfile)
			hook := filepath.Join(e.wd, ".git", "hooks", "post-checkout")
			return fixture{args: []string{hook}, cliArgs: []string{"--profile", prof}, judge: reported(fx.Exists(hook), ".git/hooks/post-checkout")}
		}},
		{name: "guard-profile-added-reported-write", vector: "append-file", setup: func(e *env) fixture {
			prof := tree(e, reportProfile)
			ci := filepath.Join(e.wd, "ci", "run.sh")
			return fixture{args: []string{ci}, cliArgs: []string{"--profile", prof}, judge: reported(contentChanged(ci), "ci/run.sh")}
		}},
	}
	rows = append(rows, newGuardRowVectors()...)
	all := make([]vcase, 0, 2*len(rows))
	for _, r := range rows {
		c := r
		c.name += "-core"
		setup := r.setup
		r.setup = func(e *env) fixture {
			return bwrapRefuses(e, setup(e))
		}
		c.setup = func(e *env) fixture {
			f := setup(e)
			if e.confined && e.backend == "" {
				f.cliArgs = append(f.cliArgs, "--backend", "core")
			}
			return bwrapRefuses(e, f)
		}
		all = append(all, r, c)
	}
	return all
}

// bwrapRefuses: bubblewrap's supervisor cannot refuse a new entry by
// name, so a profile whose [guard] refuses rows besides git's refuses
// the run there (exit 125, naming the guarantee and what is missing);
// that refusal is the row's outcome, and its stderr must say why.
func bwrapRefuses(e *env, f fixture) fixture {
	if !e.confined || e.backend != "bwrap" {
		return f
	}
	f.mayRefuse, f.mustReport = true, false
	inner := f.judge
	f.judge = func(o outcome) (bool, string) {
		if o.code == 125 {
			if !strings.Contains(o.stderr, "no-git-persistence") || !strings.Contains(o.stderr, "bubblewrap") {
				return true, "refused without naming the guarantee and the backend: " + o.stderr
			}
			if inner == nil && f.effect != nil {
				if ok, d := f.effect(); ok {
					return true, "refused, yet the effect is there: " + d
				}
			}
			return false, "run refused: " + fx.OneLine(o.stderr, 200)
		}
		if inner != nil {
			return inner(o)
		}
		return true, fmt.Sprintf("bubblewrap ran a profile with refused rows (exit %d)", o.code)
	}
	return f
}

// newGuardProfile refuses two rows of its own and matches nothing in
// the tree newGuardRowVectors make: whatever matches is made during the
// run.
const newGuardProfile = `name = "guard-new"
[guard.add.makefile]
pattern = "**/Makefile"
action = "refuse"
why = "make runs it"
[guard.add.cirun]
pattern = "ci/run.sh"
action = "refuse"
why = "the CI runs it"
`

// newGuardRowVectors make, during the run, an entry a profile's own
// refused row matches where nothing matched at launch (issue 22: Tier 1
// refuses it, Tier 2 must too): created at depth, renamed into place,
// created in a tree without .git, and a directory holding a match moved
// to where the row's anchored pattern matches it. Each control makes it
// unconfined. A symlink named for a directory of a refused pattern,
// made or moved there, is refused as well: it would alias a directory
// holding a match.
func newGuardRowVectors() []vcase {
	tree := func(e *env, git bool) (prof string) {
		files := []string{"src/main.c", "src/payload"}
		if git {
			files = append(files, ".git/config", ".git/HEAD")
		}
		for _, f := range files {
			e.file(e.wd, f, 0o644)
		}
		prof = filepath.Join(e.freshDir("guard-new-"), "guard-new.toml")
		if err := os.WriteFile(prof, []byte(newGuardProfile), 0o644); err != nil {
			e.t.Fatal(err)
		}
		return prof
	}
	return []vcase{
		{name: "guard-profile-new-refused-create", vector: "write-file", setup: func(e *env) fixture {
			prof := tree(e, true)
			mk := filepath.Join(e.wd, "src", "Makefile")
			return fixture{args: []string{mk}, cliArgs: []string{"--profile", prof}, effect: fx.Exists(mk), mustReport: true}
		}},
		{name: "guard-profile-new-refused-create-nogit", vector: "write-file", setup: func(e *env) fixture {
			prof := tree(e, false)
			mk := filepath.Join(e.wd, "src", "Makefile")
			return fixture{args: []string{mk}, cliArgs: []string{"--profile", prof}, effect: fx.Exists(mk), mustReport: true}
		}},
		{name: "guard-profile-new-refused-rename", vector: "rename-out", setup: func(e *env) fixture {
			prof := tree(e, true)
			mk := filepath.Join(e.wd, "src", "Makefile")
			return fixture{args: []string{filepath.Join(e.wd, "src", "payload"), mk}, cliArgs: []string{"--profile", prof}, effect: fx.Exists(mk), mustReport: true}
		}},
		{name: "guard-profile-new-refused-dir-move", vector: "rename-out", setup: func(e *env) fixture {
			prof := tree(e, true)
			run := filepath.Join(e.wd, "ci", "run.sh")
			return fixture{command: []string{"sh", "-c", `mkdir a && echo x > a/run.sh && "$0" rename-out a ci`, probePath},
				cliArgs: []string{"--profile", prof}, effect: fx.Exists(run)}
		}},
		// A symlink named for a pattern's directory aliases a directory
		// holding a match: ci/run.sh then resolves to a/run.sh.
		{name: "guard-profile-new-refused-symlink-dir", vector: "symlink", setup: func(e *env) fixture {
			prof := tree(e, true)
			run := filepath.Join(e.wd, "ci", "run.sh")
			return fixture{command: []string{"sh", "-c", `mkdir a && echo x > a/run.sh && "$0" symlink a ci`, probePath},
				cliArgs: []string{"--profile", prof}, effect: fx.Exists(run)}
		}},
		{name: "guard-profile-new-refused-symlink-move", vector: "rename-out", setup: func(e *env) fixture {
			prof := tree(e, true)
			run := filepath.Join(e.wd, "ci", "run.sh")
			return fixture{command: []string{"sh", "-c", `mkdir a && echo x > a/run.sh && ln -s a l && "$0" rename-out l ci`, probePath},
				cliArgs: []string{"--profile", prof}, effect: fx.Exists(run)}
		}},
	}
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
