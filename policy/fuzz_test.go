package policy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// FuzzLoadProfile: any file content either loads into a profile that
// satisfies every rule loadProfile promises, or fails with a *profileError
// naming the file and a line.
func FuzzLoadProfile(f *testing.F) {
	f.Add([]byte(fullProfile))
	for _, s := range []string{
		"", "tier = 3\n", "netwrok = 1\n", "[limits]\nmemory = -1\n", "limits.memory = \"1GiB\"\n",
		"read_exec = [\"/srv/x/bin\"]\nwritable = [\"/srv/x\"]\n", "[env.set]\nLD_PRELOAD = \"/x\"\n",
		"[env]\nwaive = [\"LD_PRELOAD\"]\n[env.set]\nLD_PRELOAD = \"/x.so\"\n", "[[limits]]\n", "a.b.c.d = 1\n",
		"name = \"x\"\nnetwork = \"allowlist\"\n", "network = \"allowlist\"\n[allowlist]\nhosts = [\"*.a.test:*\", \"[::1]\"]\ngroups = [\"go\"]\n", "x = [[[", "[env]\npassthrough = [\"LC_*\", \"*\"]\n",
	} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		fh, err := os.CreateTemp(dir, "p*.toml")
		if err != nil {
			t.Fatal(err)
		}
		path := fh.Name()
		defer os.Remove(path)
		if _, err := fh.Write(data); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		p, err := loadProfile(path)
		if err != nil {
			var pe *profileError
			if len(data) > maxProfileSize {
				return
			}
			if !errors.As(err, &pe) || !errors.Is(err, spec.ErrInvalidSpec) || pe.Line < 1 || pe.File != path {
				t.Fatalf("error %v (%T) is not a located profileError", err, err)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%s:%d: ", path, pe.Line)) {
				t.Fatalf("error %q does not name file:line", err)
			}
			return
		}
		checkProfile(t, p)
	})
}

// checkProfile asserts the invariants of a successfully loaded profile.
func checkProfile(t *testing.T, p Profile) {
	t.Helper()
	if !validProfileName(p.Name) || isBuiltin(p.Name) {
		t.Fatalf("name %q", p.Name)
	}
	if p.Tier < TierNone || p.Tier > TierHostile {
		t.Fatalf("tier %d", p.Tier)
	}
	switch {
	case p.Network == spec.DenyAll && p.Allowlist == nil:
	case p.Network == spec.Allowlist && p.Allowlist != nil:
		if _, err := p.Allowlist.Compile(); err != nil {
			t.Fatalf("loaded allowlist does not compile: %v", err)
		}
	default:
		t.Fatalf("network %q with allowlist %+v", p.Network, p.Allowlist)
	}
	if err := p.Limits.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, lists := range [][]string{p.ReadExec, p.Writable, p.Devices} {
		for _, r := range lists {
			if err := checkPathSyntax(r); err != nil {
				t.Fatalf("root %q: %v", r, err)
			}
		}
	}
	for _, w := range p.Writable {
		if systemOverlap(w) != "" && !contains(p.Waive, spec.GFSWrite) {
			t.Fatalf("writable %q overlaps a system root", w)
		}
		for _, r := range p.ReadExec {
			if spec.Within(r, w) {
				t.Fatalf("read_exec %q inside writable %q", r, w)
			}
		}
	}
	for _, d := range p.Devices {
		if !strings.HasPrefix(d, "/dev/") || contains(deniedDevices, d) {
			t.Fatalf("device %q", d)
		}
	}
	for _, g := range p.Waive {
		if !spec.KnownGuarantee(g) {
			t.Fatalf("waive %q", g)
		}
	}
	env, err := SanitizeEnv(p.Env.Set, p.Env.Waive)
	if err != nil {
		t.Fatalf("env.set does not sanitise: %v", err)
	}
	if len(env) != len(p.Env.Set) {
		t.Fatalf("env.set has duplicates: %q", p.Env.Set)
	}
	for _, n := range p.Env.Passthrough {
		if err := checkPassthroughPattern(n); err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(n, "*") && envRefusal(n) != "" && !contains(p.Env.Waive, n) {
			t.Fatalf("passthrough of refused %q", n)
		}
	}
}

// FuzzSanitizeEnv: whatever is asked for, a sanitised environment holds
// only well-formed entries, one per name, each the last value asked for,
// and no refused variable unless waived by its exact name (so never
// LD_PRELOAD without a waiver); and a refusal is never spurious.
func FuzzSanitizeEnv(f *testing.F) {
	f.Add("LANG=C\nLD_PRELOAD=/x.so\nPATH=/usr/bin", "")
	f.Add("ld_preload=/x\nA=1\nA=2", "LD_PRELOAD")
	f.Add("LD_PRELOAD=/x", "LD_PRELOAD")
	f.Add("GIT_CONFIG_NOSYSTEM=1\nGIT_CONFIG_GLOBAL=/x", "GIT_CONFIG_GLOBAL")
	f.Add("URL=https://u:p@h/\nX=\x00", "")
	f.Add("=\n==\nA", "")
	f.Fuzz(func(t *testing.T, entries, waive string) {
		in := strings.Split(entries, "\n")
		waived := strings.Split(waive, ",")
		out, err := SanitizeEnv(in, waived)
		if err != nil {
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("error %v does not wrap ErrInvalidSpec", err)
			}
			for _, kv := range in {
				if _, err := SanitizeEnv([]string{kv}, waived); err != nil {
					return
				}
			}
			t.Fatalf("refused %q although every entry passes alone: %v", in, err)
		}
		last := map[string]string{}
		for _, kv := range in {
			n, v, _ := strings.Cut(kv, "=")
			last[n] = v
		}
		if len(out) != len(last) || !sort.StringsAreSorted(out) {
			t.Fatalf("out %q for %q", out, in)
		}
		for _, kv := range out {
			n, v, ok := strings.Cut(kv, "=")
			if !ok || checkEnvName(n) != nil || strings.IndexByte(v, 0) >= 0 || last[n] != v {
				t.Fatalf("entry %q", kv)
			}
			if (envRefusal(n) != "" || urlCredentials(v)) && !contains(waived, n) {
				t.Fatalf("refused variable %q passed without a waiver %q", kv, waived)
			}
			if strings.EqualFold(n, "LD_PRELOAD") && !contains(waived, n) {
				t.Fatalf("LD_PRELOAD passed: %q", out)
			}
		}
		// Building from a caller environment never lets more through.
		env, skipped, err := BuildEnv(EnvSources{Caller: in, Passthrough: append([]string{"LD_*", "A*"}, DefaultPassthrough()...), Waive: waived})
		if err != nil {
			return
		}
		for _, kv := range env {
			n, _, _ := strings.Cut(kv, "=")
			if exactly, byPattern := passMatch(n, append([]string{"LD_*", "A*"}, DefaultPassthrough()...)); !exactly && !byPattern {
				t.Fatalf("BuildEnv passed %q, which no passthrough names", n)
			}
			if envRefusal(n) != "" && !contains(waived, n) {
				t.Fatalf("BuildEnv passed refused %q", n)
			}
			if contains(skipped, n) {
				t.Fatalf("%q both passed and skipped", n)
			}
		}
	})
}

// FuzzPathList: a path list that validates has only absolute, normalised,
// non-empty components inside the read roots and outside the writable
// ones; DerivePATH keeps only such components.
func FuzzPathList(f *testing.F) {
	base, err := filepath.EvalSymlinks(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for _, d := range []string{"ro/bin", "rw/bin", "out"} {
		if err := os.MkdirAll(filepath.Join(base, d), 0o755); err != nil {
			f.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(base, "out"), filepath.Join(base, "ro/esc")); err != nil {
		f.Fatal(err)
	}
	ro := []string{base + "/ro", "/usr"}
	rw := []string{base + "/rw"}
	f.Add(uint8(0), "/usr/bin:"+base+"/ro/bin")
	f.Add(uint8(0), ":/usr/bin")
	f.Add(uint8(1), base+"/ro/esc")
	f.Add(uint8(2), base+"/rw/bin:"+base+"/ro/bin")
	f.Add(uint8(3), base+"/ro/bin/*")
	f.Add(uint8(4), "/usr/lib/x.so "+base+"/ro/bin")
	f.Add(uint8(0), "/usr/bin/..:/usr/./bin:/usr//bin")
	names := []string{"PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "CLASSPATH", "LD_PRELOAD", "GOPATH"}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		name := names[int(which)%len(names)]
		check := func(c string) {
			if checkPathSyntax(c) != nil || !under(c, ro) || under(c, rw) {
				t.Fatalf("%s=%q: component %q accepted", name, value, c)
			}
		}
		if err := validatePathList(name, value, ro, rw); err == nil {
			for _, c := range pathListComponents(name, value) {
				check(c)
			}
			if name != "LD_PRELOAD" && strings.Contains(":"+value+":", "::") {
				t.Fatalf("%s=%q: empty component accepted", name, value)
			}
		} else if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), name+": ") {
			t.Fatalf("error %v does not name %s", err, name)
		}
		path, omitted := DerivePATH(value, ro, rw)
		if path != "/usr/bin:/bin" { // DerivePATH's fallback when nothing passes
			for _, c := range strings.Split(path, ":") {
				check(c)
			}
		}
		for _, c := range omitted {
			if checkPathComponent(c, ro, rw) == nil {
				t.Fatalf("DerivePATH omitted good component %q", c)
			}
		}
	})
}

// FuzzParseToken: no input panics; a token that parses serialises back to
// exactly itself (no malleability), and any scope survives a round trip.
func FuzzParseToken(f *testing.F) {
	e, err := NewEngineWithKey(testKey(9))
	if err != nil {
		f.Fatal(err)
	}
	c, err := e.Mint("default", "scope", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	tok, err := e.Token(c)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok, "scope")
	f.Add(tok+"A", "\x00\xff")
	f.Add(tok[:10]+"\r"+tok[10:], "")
	f.Add("cfn1..", "")
	f.Add("cfn1.AA.AA", strings.Repeat("s", 300))
	f.Add("", strings.Repeat("s", maxScope))
	f.Add("", strings.Repeat("s", maxScope+1))
	f.Fuzz(func(t *testing.T, tok, scope string) {
		if c, err := e.ParseToken(tok); err == nil {
			again, err := e.Token(c)
			if err != nil || again != tok {
				t.Fatalf("token %q re-serialised as %q (%v)", tok, again, err)
			}
			if _, err := Authorize(c, ""); err != nil {
				t.Fatalf("parsed capability refused: %v", err)
			}
		} else if !errors.Is(err, spec.ErrCapability) {
			t.Fatalf("error %v does not wrap ErrCapability", err)
		}
		m, err := e.Mint("default", scope, time.Hour)
		if len(scope) > maxScope {
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("Mint with a %d-byte scope: %v, want ErrInvalidSpec", len(scope), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Token(m)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.ParseToken(s)
		if err != nil {
			t.Fatal(err)
		}
		if p.ID() != m.ID() || p.Scope() != scope || p.Profile() != "default" || p.ProfileDigest() != m.ProfileDigest() || !p.Expires().Equal(m.Expires()) {
			t.Fatalf("round trip: %+v != %+v", p, m)
		}
	})
}

// FuzzEgressGrant: any token either parses into a grant whose fields pass
// the checks GrantEgress makes, or is refused with ErrCapability; any
// grant request is either refused with ErrInvalidSpec or signed into a
// token that parses back to the same grant and matches its own host.
func FuzzEgressGrant(f *testing.F) {
	e, err := NewEngineWithKey(testKey(10))
	if err != nil {
		f.Fatal(err)
	}
	tok, _, err := e.GrantEgress(EgressGrant{Task: "t1", Host: "a.test", Port: 443}, time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(tok, "t1", "a.test", 443)
	f.Add(tok+"A", "", "group:npm", 443)
	f.Add("cfg1..", "x y", "A.test", 0)
	f.Add("cfg1.AA.AA", strings.Repeat("t", 129), "192.0.2.1", 65536)
	f.Add("", "", "[::1]", 1)
	f.Fuzz(func(t *testing.T, tok, task, host string, port int) {
		if g, err := e.ParseEgressGrant(tok); err == nil {
			if err := g.check(); err != nil || g.ID == "" {
				t.Fatalf("token %q parsed into an invalid grant %+v (%v)", tok, g, err)
			}
		} else if !errors.Is(err, spec.ErrCapability) {
			t.Fatalf("error %v does not wrap ErrCapability", err)
		}
		s, g, err := e.GrantEgress(EgressGrant{Task: task, Host: host, Port: port}, time.Hour)
		if err != nil {
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("GrantEgress error %v does not wrap ErrInvalidSpec", err)
			}
			return
		}
		p, err := e.ParseEgressGrant(s)
		if err != nil {
			t.Fatalf("a grant for %q:%d did not parse back: %v", host, port, err)
		}
		if p != g {
			t.Fatalf("round trip: %+v != %+v", p, g)
		}
		if _, group := strings.CutPrefix(host, "group:"); !group && !p.Matches(host, port) {
			t.Fatalf("grant %+v does not match its own host", p)
		}
	})
}
