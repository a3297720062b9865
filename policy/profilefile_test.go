package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/guardset"
	"github.com/confine-sandbox/confine/spec"
)

func writeProfile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const fullProfile = `# a CI profile
name = "ci-build"
description = "builds offline"
tier = 2
read_exec = ["/opt/toolchain", "/srv/cache"]
writable = ["/var/tmp/ci", "/opt/toolchain/cache"]
devices = ["/dev/kvm"]
network = "deny-all"
waive = ["no-foreign-signals"]
require_namespaces = true

[env]
passthrough = ["GOFLAGS", "CI_*"]
waive = ["NODE_OPTIONS"]

[env.set]
GOPROXY = "off"
NODE_OPTIONS = "--max-old-space-size=4096"
PATH = "/opt/toolchain/bin:/usr/bin"

[limits]
wall_time = "5m"
cpu_time = "90"
kill_grace = "1s"
memory = "2GiB"
file_size = 1048576
output_limit = "1MiB"
max_procs = 256
open_files = 1024
`

func TestLoadProfile(t *testing.T) {
	path := writeProfile(t, "ci.toml", fullProfile)
	p, err := loadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := Profile{
		Name:              "ci-build",
		Description:       "builds offline",
		Tier:              TierSandboxed,
		ReadExec:          []string{"/opt/toolchain", "/srv/cache"},
		Writable:          []string{"/var/tmp/ci", "/opt/toolchain/cache"},
		Devices:           append(append([]string(nil), DefaultDevices()...), "/dev/kvm"),
		Network:           spec.DenyAll,
		Waive:             []string{spec.GSignals},
		RequireNamespaces: true,
		Env: EnvPolicy{
			Passthrough: []string{"GOFLAGS", "CI_*"},
			Set:         []string{"GOPROXY=off", "NODE_OPTIONS=--max-old-space-size=4096", "PATH=/opt/toolchain/bin:/usr/bin"},
			Waive:       []string{"NODE_OPTIONS"},
		},
		Limits: spec.Limits{
			WallTime: 5 * time.Minute, CPUTime: 90 * time.Second, KillGrace: time.Second,
			MemoryBytes: 2 << 30, FileSizeBytes: 1 << 20, OutputBytes: 1 << 20,
			MaxProcs: 256, OpenFiles: 1024,
		},
		Source: path,
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got  %+v\nwant %+v", p, want)
	}
	if p.Digest() == "" || p.Digest() != want.Digest() {
		t.Fatal("digest")
	}
	moved := p
	moved.Source = "/elsewhere.toml"
	if moved.Digest() != p.Digest() {
		t.Fatal("Source is part of the digest")
	}
	changed := p
	changed.Limits.MaxProcs++
	if changed.Digest() == p.Digest() {
		t.Fatal("digest ignores limits")
	}
	relaxed := p
	relaxed.RequireNamespaces = false
	if relaxed.Digest() == p.Digest() {
		t.Fatal("digest ignores require_namespaces")
	}
}

func TestLoadProfileDefaults(t *testing.T) {
	p, err := loadProfile(writeProfile(t, "minimal.toml", "# nothing\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "minimal" || p.Tier != TierSandboxed || p.Network != spec.DenyAll || !reflect.DeepEqual(p.Devices, DefaultDevices()) {
		t.Fatalf("defaults: %+v", p)
	}
	// Tier 3 loads; CheckTier refuses it.
	p, err = loadProfile(writeProfile(t, "hostile.toml", "tier = 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckTier(p.Tier); !errors.Is(err, spec.ErrUnavailable) {
		t.Fatalf("tier 3 profile: CheckTier = %v", err)
	}
}

func TestLoadProfileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		line    int
		key     string
		msg     string
	}{
		{"unknown top-level key", "tier = 2\nnetwrok = \"deny-all\"\n", 2, "netwrok", "unknown key"},
		{"unknown key in table", "[limits]\nwall_time = \"1m\"\nmemroy = \"1GiB\"\n", 3, "limits.memroy", "unknown key"},
		{"unknown dotted key", "\n\nlimits.walltime = \"1m\"\n", 3, "limits.walltime", "unknown key"},
		{"unknown env key", "[env]\nset_ = 1\n", 2, "env.set_", "unknown key"},
		{"unknown table", "\n[secrets]\na = 1\n", 2, "secrets", "unknown key"},
		{"syntax error", "tier = 2\nname = \n", 2, "name", "expected value"},
		{"syntax error before any key", "[[[\n", 1, "", "(syntax)"},
		{"duplicate key", "tier = 2\ntier = 3\n", 2, "tier", "already been defined"},
		{"wrong type", "tier = \"two\"\n", 1, "tier", "want an integer, got a string"},
		{"unknown tier", "\ntier = 4\n", 2, "tier", "unknown tier 4"},
		{"negative tier", "tier = -1\n", 1, "tier", "unknown tier -1"},
		{"relative read root", "read_exec = [\"/opt\", \"usr/bin\"]\n", 1, "read_exec[1]", `"usr/bin" is relative`},
		{"unnormalised writable", "\nwritable = [\"/var/tmp/../x\"]\n", 2, "writable[0]", "not normalised"},
		{"trailing slash", "read_exec = [\"/opt/\"]\n", 1, "read_exec[0]", "not normalised"},
		{"empty path", "read_exec = [\"\"]\n", 1, "read_exec[0]", "empty path"},
		{"read and write", "read_exec = [\"/srv/x\"]\nwritable = [\"/srv/x\"]\n", 2, "writable[0]", "also in read_exec"},
		{"read inside write", "read_exec = [\"/srv/x/bin\"]\nwritable = [\"/srv/x\"]\n", 1, "read_exec[0]", "would be writable too"},
		{"duplicate entry", "read_exec = [\"/a\", \"/a\"]\n", 1, "read_exec[1]", "listed twice"},
		{"read root slash", "read_exec = [\"/\"]\n", 1, "read_exec[0]", "every file readable"},
		{"writable slash", "writable = [\"/\"]\n", 1, "writable[0]", "every file writable"},
		{"writable system root", "writable = [\"/usr/local\"]\n", 1, "writable[0]", "inside system root /usr"},
		{"writable contains etc", "writable = [\"/\"]\nwaive = [\"fs-read-confined\"]\n", 1, "writable[0]", "every file writable"},
		{"device outside dev", "devices = [\"/tmp/dev\"]\n", 1, "devices[0]", "not under /dev"},
		{"device mem", "devices = [\"/dev/mem\"]\n", 1, "devices[0]", "never granted"},
		{"unknown guarantee", "waive = [\"no-network\", \"no-fun\"]\n", 1, "waive[1]", `unknown guarantee "no-fun"`},
		{"allowlist without network", "[allowlist]\nhosts = [\"a.test\"]\n", 1, "allowlist", `needs network = "allowlist"`},
		{"allowlist bad host", "network = \"allowlist\"\n[allowlist]\nhosts = [\"ok.test\", \"a*.test\"]\n", 3, "allowlist.hosts[1]", "'*' is allowed only"},
		{"allowlist bad port", "network = \"allowlist\"\n[allowlist]\nhosts = [\"a.test:0\"]\n", 3, "allowlist.hosts[0]", "want 1-65535"},
		{"allowlist unknown group", "network = \"allowlist\"\n[allowlist]\ngroups = [\"maven\"]\n", 3, "allowlist.groups[0]", "unknown registry group"},
		{"allowlist bad special", "network = \"allowlist\"\n[allowlist]\nspecial_addresses = [\"10.0.0.1/8\"]\n", 3, "allowlist.special_addresses[0]", "canonical prefix"},
		{"allowlist unknown key", "network = \"allowlist\"\n[allowlist]\nports = [1]\n", 3, "allowlist.ports", "unknown key"},
		{"allowlist not a table", "network = \"allowlist\"\nallowlist = 1\n", 2, "allowlist", "want a table"},
		{"unknown network", "network = \"open\"\n", 1, "network", "unknown network policy"},
		{"negative memory", "[limits]\nmemory = -1\n", 2, "limits.memory", "negative size"},
		{"negative memory string", "[limits]\nmemory = \"-1GiB\"\n", 2, "limits.memory", "negative size"},
		{"bad size", "[limits]\nfile_size = \"lots\"\n", 2, "limits.file_size", "invalid size"},
		{"negative duration", "[limits]\nwall_time = \"-5m\"\n", 2, "limits.wall_time", "negative duration"},
		{"integer duration", "[limits]\ncpu_time = 30\n", 2, "limits.cpu_time", "want a duration string"},
		{"negative count", "[limits]\n\nmax_procs = -3\n", 3, "limits.max_procs", "negative count"},
		{"float count", "[limits]\nopen_files = 1.5\n", 2, "limits.open_files", "got a float"},
		{"limits not a table", "limits = 3\n", 1, "limits", "want a table"},
		{"require_namespaces not a boolean", "\nrequire_namespaces = \"yes\"\n", 2, "require_namespaces", "want a boolean, got a string"},
		{"refused set", "[env.set]\nAWS_SECRET_ACCESS_KEY = \"x\"\n", 2, "env.set.AWS_SECRET_ACCESS_KEY", "refused (cloud credentials"},
		{"refused passthrough", "[env]\npassthrough = [\"SSH_AUTH_SOCK\"]\n", 2, "env.passthrough[0]", "SSH_AUTH_SOCK is refused"},
		{"set and passthrough", "[env]\npassthrough = [\"GOFLAGS\"]\n[env.set]\nGOFLAGS = \"-x\"\n", 4, "env.set.GOFLAGS", "both in env.passthrough and env.set"},
		{"bad set path", "[env.set]\nPATH = \"/usr/bin::/bin\"\n", 2, "env.set.PATH", "empty component"},
		{"non-string set", "[env.set]\nX = 1\n", 2, "env.set.X", "want a string value"},
		{"bad set name", "[env.set]\n\"A B\" = \"x\"\n", 2, `env.set."A B"`, "not allowed"},
		{"bad pattern", "[env]\npassthrough = [\"A*B\"]\n", 2, "env.passthrough[0]", "may only end"},
		{"bad waive name", "[env]\nwaive = [\"A=B\"]\n", 2, "env.waive[0]", "not allowed"},
		{"builtin name", "name = \"default\"\n", 1, "name", "built-in"},
		{"bad name", "name = \"../x\"\n", 1, "name", "not usable"},
		{"first problem by line", "tier = 9\nnetwork = \"x\"\nfoo = 1\n", 1, "tier", "(and 2 more problems)"},
		// [guard]: the persistence guard's set (guardset.New).
		{"guard unknown row", "[guard]\nrefuse = [\"envrc\", \"nosuch\"]\n", 2, "guard.refuse[1]", `no row "nosuch" to move`},
		{"guard row moved to its default", "[guard]\nreport = [\"envrc\"]\n", 2, "guard.report[0]", `"envrc" is reported by default`},
		{"guard row moved both ways", "[guard]\nrefuse = [\"envrc\"]\nreport = [\"envrc\"]\n", 3, "guard.report[0]", "moved twice"},
		{"guard row listed twice", "[guard]\nrefuse = [\"envrc\", \"envrc\"]\n", 2, "guard.refuse[1]", "listed twice"},
		{"guard unknown key", "[guard]\nrefuse = []\nallow = [\"x\"]\n", 3, "guard.allow", "unknown key"},
		{"guard not a table", "guard = 1\n", 1, "guard", "want a table"},
		{"guard add bad action", "[guard.add.mk]\npattern = \"**/Makefile\"\naction = \"deny\"\n", 1, "guard.add.mk.action", `want "refuse" or "report"`},
		{"guard add no action", "[guard.add.mk]\npattern = \"**/Makefile\"\n", 1, "guard.add.mk.action", `want "refuse" or "report"`},
		{"guard add absolute", "[guard.add.mk]\npattern = \"/etc/passwd\"\naction = \"refuse\"\n", 1, "guard.add.mk", "relative to each writable root"},
		{"guard add dotdot", "[guard.add.mk]\npattern = \"../x\"\naction = \"refuse\"\n", 1, "guard.add.mk", `".."`},
		{"guard add everything", "[guard.add.all]\npattern = \"**\"\naction = \"refuse\"\n", 1, "guard.add.all", "names nothing"},
		{"guard add glob", "[guard.add.sh]\npattern = \"**/*.sh\"\naction = \"refuse\"\n", 1, "guard.add.sh", "whole component"},
		{"guard add name taken", "[guard.add.envrc]\npattern = \"x\"\naction = \"refuse\"\n", 1, "guard.add.envrc", "the name is taken"},
		{"guard add bad name", "[guard.add.Make]\npattern = \"x\"\naction = \"refuse\"\n", 1, "guard.add.Make", "a name is"},
		{"guard add unknown key", "[guard.add.mk]\npattern = \"x\"\naction = \"refuse\"\nmode = 1\n", 4, "guard.add.mk.mode", "unknown key"},
		{"guard add not a table", "[guard]\nadd = [\"x\"]\n", 2, "guard.add", "want a table"},
		{"guard git row back to refused under the waiver", "waive = [\"no-git-persistence\"]\n[guard]\nrefuse = [\"git-config\"]\n", 3, "guard.refuse[0]", `"git-config" is refused by default`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeProfile(t, "p.toml", tt.content)
			_, err := loadProfile(path)
			var pe *profileError
			if !errors.As(err, &pe) || !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("err = %v, want a *profileError wrapping ErrInvalidSpec", err)
			}
			if pe.File != path || pe.Line != tt.line || pe.Key != tt.key || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %s:%d key %q: %v; want line %d key %q containing %q", pe.File, pe.Line, pe.Key, err, tt.line, tt.key, tt.msg)
			}
			loc := fmt.Sprintf("%s:%d: ", path, tt.line)
			if !strings.Contains(err.Error(), loc) || (tt.key != "" && !strings.Contains(err.Error(), tt.key)) {
				t.Fatalf("error %q does not name %q and key %q", err, loc, tt.key)
			}
		})
	}
}

func TestLoadProfileFile(t *testing.T) {
	dir := t.TempDir()
	ww := filepath.Join(dir, "ww.toml")
	if err := os.WriteFile(ww, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ww, 0o666); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.toml")
	if err := os.WriteFile(big, []byte(strings.Repeat("#\n", maxProfileSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	badName := filepath.Join(dir, "my profile.toml")
	if err := os.WriteFile(badName, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.toml")
	if err := mkfifo(fifo); errors.Is(err, errors.ErrUnsupported) {
		t.Skip("this OS has no FIFOs in the file system")
	} else if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ path, msg string }{
		{fifo, "not a regular file"},
		{ww, "writable by every user"},
		{big, "larger than"},
		{dir, "not a regular file"},
		{filepath.Join(dir, "missing.toml"), "no such file"},
		{badName, `name: the file name gives the profile name "my profile"`},
	}
	for _, tt := range tests {
		_, err := loadProfile(tt.path)
		if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("loadProfile(%s) = %v, want %q", tt.path, err, tt.msg)
		}
	}
}

func TestResolveProfile(t *testing.T) {
	path := writeProfile(t, "ci.toml", fullProfile)
	tests := []struct {
		arg, name, err string
	}{
		{"default", "default", ""},
		{path, "ci-build", ""},
		{"nosuch", "", "unknown profile"},
		{"ci.toml", "", "needs a path with a '/'"},
		{"./nosuch.toml", "", "no such file"},
	}
	for _, tt := range tests {
		p, err := ResolveProfile(tt.arg)
		if tt.err != "" {
			if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("ResolveProfile(%q) = %v, want %q", tt.arg, err, tt.err)
			}
			continue
		}
		if err != nil || p.Name != tt.name {
			t.Errorf("ResolveProfile(%q) = %q, %v", tt.arg, p.Name, err)
		}
	}
}

func TestParseSizeDuration(t *testing.T) {
	sizes := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"1048576", 1 << 20, true}, {"512KiB", 512 << 10, true}, {"2GiB", 2 << 30, true},
		{"1GB", 1e9, true}, {"3M", 3 << 20, true}, {"-1", 0, false}, {"x", 0, false}, {"9999999999TiB", 0, false},
	}
	for _, s := range sizes {
		got, err := spec.ParseSize(s.in)
		if (err == nil) != s.ok || got != s.want {
			t.Errorf("spec.ParseSize(%q) = %d, %v", s.in, got, err)
		}
	}
	durs := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"30", 30 * time.Second, true}, {"5m", 5 * time.Minute, true}, {"1h30m", 90 * time.Minute, true},
		{"-5m", 0, false}, {"soon", 0, false}, {"99999999999999", 0, false},
	}
	for _, d := range durs {
		got, err := spec.ParseDuration(d.in)
		if (err == nil) != d.ok || got != d.want {
			t.Errorf("spec.ParseDuration(%q) = %v, %v", d.in, got, err)
		}
	}
}

// TestProfileGuard: a valid [guard] loads as written, the guard's policy
// follows it, and a git row moved to report waives no-git-persistence in
// the run's guarantees (Waives) while an editor row does not.
func TestProfileGuard(t *testing.T) {
	if guardset.GitWaiver != spec.GGitPersistence {
		t.Fatalf("guardset.GitWaiver %q is not spec.GGitPersistence %q", guardset.GitWaiver, spec.GGitPersistence)
	}
	for _, c := range []struct {
		name, content string
		want          *Guard
		actions       map[string]guardset.Action // path -> action
		gitWaived     bool
	}{
		{"none", "tier = 2\n", nil, map[string]guardset.Action{".git/config": guardset.Refuse, ".envrc": guardset.Report}, false},
		{"editor refused", "[guard]\nrefuse = [\"envrc\", \"vscode-tasks\"]\n",
			&Guard{Refuse: []string{"envrc", "vscode-tasks"}},
			map[string]guardset.Action{".envrc": guardset.Refuse, ".vscode/tasks.json": guardset.Refuse, ".vscode/settings.json": guardset.Report, ".git/config": guardset.Refuse}, false},
		{"hooks reported", "[guard]\nreport = [\"git-hooks\"]\n",
			&Guard{Report: []string{"git-hooks"}},
			map[string]guardset.Action{".git/hooks/pre-commit": guardset.Report, ".git/config": guardset.Refuse}, true},
		{"added", "[guard.add.makefile]\npattern = \"**/Makefile\"\naction = \"refuse\"\nwhy = \"make runs it\"\n[guard.add.justfile]\npattern = \"justfile\"\naction = \"report\"\n",
			&Guard{Add: []GuardEntry{{Name: "justfile", Pattern: "justfile", Action: "report"}, {Name: "makefile", Pattern: "**/Makefile", Action: "refuse", Why: "make runs it"}}},
			map[string]guardset.Action{"src/Makefile": guardset.Refuse, "justfile": guardset.Report, "sub/justfile": guardset.Allow}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := parseProfile([]byte(c.content), "p.toml")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Guard, c.want) {
				t.Fatalf("Guard = %+v, want %+v", p.Guard, c.want)
			}
			g, err := p.GuardPolicy()
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range c.actions {
				got := guardset.Allow
				if e, ok := g.Classify("/w", path); ok {
					got = g.Action(e)
				}
				if got != want {
					t.Errorf("%s: %v, want %v", path, got, want)
				}
			}
			if w := slices.Contains(p.Waives(), spec.GGitPersistence); w != c.gitWaived {
				t.Errorf("Waives() = %v: no-git-persistence waived %v, want %v", p.Waives(), w, c.gitWaived)
			}
			if slices.Contains(p.Waive, spec.GGitPersistence) {
				t.Errorf("Waive = %v: the profile's own list changed", p.Waive)
			}
		})
	}
	// A profile without [guard] keeps its digest (capabilities minted
	// before stay valid): the field is left out of its form.
	a, _ := parseProfile([]byte("name = \"x\"\n"), "x.toml")
	if b, _ := json.Marshal(a); strings.Contains(string(b), "Guard") {
		t.Errorf("a profile without [guard] has it in its digested form: %s", b)
	}
}
