package policy

import (
	"encoding/json"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestParseHostEntry(t *testing.T) {
	tests := []struct {
		entry   string
		pattern string
		port    int
		err     string
	}{
		{"allowed.test", "allowed.test", 443, ""},
		{"Allowed.Test.", "allowed.test", 443, ""},
		{"allowed.test:8443", "allowed.test", 8443, ""},
		{"allowed.test:*", "allowed.test", anyPort, ""},
		{"*.example.com", "*.example.com", 443, ""},
		{"*", "*", 443, ""},
		{"*:*", "*", anyPort, ""},
		{"127.0.0.1:8080", "127.0.0.1", 8080, ""},
		{"[::1]:443", "::1", 443, ""},
		{"[::1]", "::1", 443, ""},
		{"::1", "::1", 443, ""},
		{"[::ffff:127.0.0.1]:80", "127.0.0.1", 80, ""},
		{"a*.test", "", 0, "'*' is allowed only"},
		{"*.com", "", 0, "too wide"},
		{"*.10.0.0.1", "", 0, "needs a domain"},
		{"*.0x7f.1", "", 0, "non-standard form"},
		{"x.test:0", "", 0, "want 1-65535"},
		{"x.test:65536", "", 0, "want 1-65535"},
		{"x.test:080", "", 0, "want 1-65535"},
		{"x.test:", "", 0, "empty port"},
		{"", "", 0, "want 1 to 253"},
		{"a..test", "", 0, "bad label"},
		{"-a.test", "", 0, "bad label"},
		{"a_b.test", "", 0, "not allowed"},
		{"127.1", "", 0, "non-standard form"},
		{"0x7f.1", "", 0, "non-standard form"},
		{"[fe80::1%eth0]", "", 0, "not an IPv6 literal"},
		{"[::1]x", "", 0, `port "x"`},
	}
	for _, tt := range tests {
		t.Run(tt.entry, func(t *testing.T) {
			r, err := parseHostEntry(tt.entry)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseHostEntry(%q) = %+v, %v; want error containing %q", tt.entry, r, err, tt.err)
				}
				return
			}
			if err != nil || r.Pattern != tt.pattern || r.Port != tt.port {
				t.Fatalf("parseHostEntry(%q) = %+v, %v; want pattern %q port %d", tt.entry, r, err, tt.pattern, tt.port)
			}
		})
	}
}

func TestAllowlistMatch(t *testing.T) {
	a := Allowlist{
		Hosts:  []string{"allowed.test", "*.wild.test:8443", "127.0.0.1:*", "[::1]:443"},
		Groups: []string{"npm"},
	}
	c, err := a.Compile()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		host  string
		port  int
		entry string // "" = denied
	}{
		{"allowed.test", 443, "allowed.test"},
		{"allowed.test", 80, ""},
		{"sub.allowed.test", 443, ""},
		{"denied.test", 443, ""},
		{"a.wild.test", 8443, "*.wild.test:8443"},
		{"a.b.wild.test", 8443, "*.wild.test:8443"},
		{"wild.test", 8443, ""}, // a wildcard covers subdomains only
		{"a.wild.test", 443, ""},
		{"xwild.test", 8443, ""},
		{"127.0.0.1", 1, "127.0.0.1:*"},
		{"127.0.0.2", 1, ""},
		{"::1", 443, "[::1]:443"},
		{"registry.npmjs.org", 443, "group:npm"},
		{"registry.npmjs.org", 80, ""},
		{"pypi.org", 443, ""},
		// Not normalised: never matches (the proxy normalises first).
		{"ALLOWED.test", 443, ""},
		{"allowed.test.", 443, ""},
		{"[::1]", 443, ""},
	}
	for _, tt := range tests {
		entry, ok := c.Match(tt.host, tt.port)
		if ok != (tt.entry != "") || entry != tt.entry {
			t.Errorf("Match(%q, %d) = %q, %v; want %q", tt.host, tt.port, entry, ok, tt.entry)
		}
	}
	if !c.Names(netip.MustParseAddr("127.0.0.1")) || c.Names(netip.MustParseAddr("127.0.0.2")) {
		t.Error("an IP-literal entry must name exactly its own address as special")
	}
}

func TestAllowlistEmptyAndStar(t *testing.T) {
	var empty Allowlist
	c, err := empty.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"allowed.test", "127.0.0.1", "x"} {
		if e, ok := c.Match(h, 443); ok {
			t.Errorf("empty allowlist allowed %s via %q", h, e)
		}
	}
	var nilList *CompiledAllowlist
	if _, ok := nilList.Match("a.test", 443); ok {
		t.Error("nil allowlist allowed a host")
	}
	star, err := Allowlist{Hosts: []string{"*"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := star.Match("anything.test", 443); !ok {
		t.Error(`explicit "*" did not allow a host on 443`)
	}
	if _, ok := star.Match("anything.test", 22); ok {
		t.Error(`"*" without a port allowed port 22`)
	}
	if star.Names(netip.MustParseAddr("169.254.169.254")) {
		t.Error(`"*" must not name special addresses`)
	}
}

func TestAllowlistCompileErrors(t *testing.T) {
	tests := []struct {
		name string
		a    Allowlist
		msg  string
	}{
		{"duplicate", Allowlist{Hosts: []string{"a.test", "A.test"}}, "listed twice"},
		{"unknown group", Allowlist{Groups: []string{"maven"}}, "unknown registry group"},
		{"not canonical", Allowlist{Special: []string{"10.0.0.1/8"}}, "canonical prefix"},
		{"everything", Allowlist{Special: []string{"0.0.0.0/0"}}, "every address"},
		{"mapped", Allowlist{Special: []string{"::ffff:10.0.0.0/104"}}, "IPv4 form"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.a.Compile()
			if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("Compile() = %v; want ErrInvalidSpec containing %q", err, tt.msg)
			}
		})
	}
}

func TestAllowlistSpecial(t *testing.T) {
	c, err := Allowlist{Special: []string{"10.1.0.0/16", "fd00::/8"}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		ip   string
		want bool
	}{{"10.1.2.3", true}, {"10.2.0.1", false}, {"::ffff:10.1.0.1", true}, {"fd12::1", true}, {"fe80::1", false}} {
		if got := c.Names(netip.MustParseAddr(tt.ip)); got != tt.want {
			t.Errorf("Names(%s) = %v, want %v", tt.ip, got, tt.want)
		}
	}
}

func TestRegistryGroups(t *testing.T) {
	for _, g := range []string{"go", "npm", "pypi", "crates"} {
		hosts, ok := registryGroupHosts(g)
		if !ok || len(hosts) == 0 {
			t.Fatalf("registry group %q missing", g)
		}
		for _, h := range hosts {
			if n, err := NormalizeHost(h); err != nil || n != h {
				t.Errorf("group %s host %q is not normalised: %q, %v", g, h, n, err)
			}
		}
	}
}

func TestProfileAllowlist(t *testing.T) {
	p, err := parseProfile([]byte("name = \"net\"\nnetwork = \"allowlist\"\n[allowlist]\nhosts = [\"allowed.test\", \"127.0.0.1:*\"]\ngroups = [\"go\", \"npm\"]\nspecial_addresses = [\"10.1.0.0/16\"]\n"), "net.toml")
	if err != nil {
		t.Fatal(err)
	}
	if p.Network != spec.Allowlist || p.Allowlist == nil || len(p.Allowlist.Hosts) != 2 || len(p.Allowlist.Groups) != 2 || len(p.Allowlist.Special) != 1 {
		t.Fatalf("profile = %+v, allowlist %+v", p, p.Allowlist)
	}
	// network = "allowlist" alone is an empty allowlist: deny all.
	p, err = parseProfile([]byte("name = \"net\"\nnetwork = \"allowlist\"\n"), "net.toml")
	if err != nil || p.Allowlist == nil || len(p.Allowlist.Hosts)+len(p.Allowlist.Groups) != 0 {
		t.Fatalf("bare allowlist: %+v, %v", p.Allowlist, err)
	}
	// The digest of a deny-all profile does not change with the new
	// field (capabilities minted before stay valid).
	d, _ := lookupProfile("default")
	if strings.Contains(mustJSON(t, d), "Allowlist") {
		t.Fatal("a deny-all profile's canonical form mentions Allowlist")
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAllowlistResolve(t *testing.T) {
	c, err := Allowlist{Hosts: []string{"allowed.test"}, Resolve: map[string][]string{"allowed.test": {"127.0.0.1", "::ffff:10.0.0.1"}}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	got, ok := c.Lookup("allowed.test")
	if !ok || len(got) != 2 || got[0] != netip.MustParseAddr("127.0.0.1") || got[1] != netip.MustParseAddr("10.0.0.1") {
		t.Fatalf("Lookup = %v, %v", got, ok)
	}
	if _, ok := c.Lookup("other.test"); ok {
		t.Fatal("a name without a pin resolved")
	}
	if c.Names(netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("a pinned address must still be named in special_addresses")
	}
	for _, bad := range []map[string][]string{
		{"Allowed.test": {"127.0.0.1"}}, {"127.0.0.1": {"127.0.0.1"}}, {"a.test": nil}, {"a.test": {"localhost"}},
	} {
		if _, err := (Allowlist{Resolve: bad}).Compile(); !errors.Is(err, spec.ErrInvalidSpec) {
			t.Errorf("resolve %v: %v", bad, err)
		}
	}
	p, err := parseProfile([]byte("name = \"n\"\nnetwork = \"allowlist\"\n[allowlist]\nhosts = [\"a.test\"]\n[allowlist.resolve]\n\"a.test\" = [\"127.0.0.1\"]\n"), "n.toml")
	if err != nil || len(p.Allowlist.Resolve["a.test"]) != 1 {
		t.Fatalf("%+v %v", p.Allowlist, err)
	}
	_, err = parseProfile([]byte("name = \"n\"\nnetwork = \"allowlist\"\n[allowlist.resolve]\n\"a.test\" = [\"x\"]\n"), "n.toml")
	var pe *profileError
	if !errors.As(err, &pe) || pe.Key != `allowlist.resolve."a.test"` || pe.Line != 4 {
		t.Fatalf("bad resolve: %v (%+v)", err, pe)
	}
}

func TestAllowlistCredentials(t *testing.T) {
	ok := CredentialRoute{Header: "Authorization", Env: "API_TOKEN", Prefix: "Bearer "}
	c, err := Allowlist{Hosts: []string{"api.test"}, Credentials: map[string]CredentialRoute{"api.test": ok}}.Compile()
	if err != nil {
		t.Fatal(err)
	}
	if r, found := c.Credential("api.test"); !found || r != ok || r.UpstreamPort() != 443 {
		t.Fatalf("Credential = %+v, %v", r, found)
	}
	for _, tt := range []struct {
		name  string
		hosts []string
		r     CredentialRoute
		msg   string
	}{
		{"host not allowed", nil, ok, "not allowed on port 443"},
		{"port not allowed", []string{"api.test"}, CredentialRoute{Header: "Authorization", Env: "API_TOKEN", Port: 8443}, "not allowed on port 8443"},
		{"bad header", []string{"api.test"}, CredentialRoute{Header: "Bad Header", Env: "API_TOKEN"}, "not a header name"},
		{"framing header", []string{"api.test"}, CredentialRoute{Header: "Host", Env: "API_TOKEN"}, "cannot carry"},
		{"bad env", []string{"api.test"}, CredentialRoute{Header: "Authorization", Env: "A=B"}, "env"},
		{"line break", []string{"api.test"}, CredentialRoute{Header: "Authorization", Env: "API_TOKEN", Prefix: "x\r\n"}, "line break"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Allowlist{Hosts: tt.hosts, Credentials: map[string]CredentialRoute{"api.test": tt.r}}.Compile()
			if !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("%v, want %q", err, tt.msg)
			}
		})
	}
	p, err := parseProfile([]byte("name = \"n\"\nnetwork = \"allowlist\"\n[allowlist]\nhosts = [\"api.test\"]\n[allowlist.credentials.\"api.test\"]\nheader = \"Authorization\"\nenv = \"API_TOKEN\"\nprefix = \"Bearer \"\n"), "n.toml")
	if err != nil || p.Allowlist.Credentials["api.test"] != ok {
		t.Fatalf("%+v %v", p.Allowlist, err)
	}
	_, err = parseProfile([]byte("name = \"n\"\nnetwork = \"allowlist\"\n[allowlist]\nhosts = [\"api.test\"]\n[allowlist.credentials.\"api.test\"]\nheader = \"Authorization\"\nenv = \"X\"\nenvv = \"X\"\n"), "n.toml")
	var pe *profileError
	if !errors.As(err, &pe) || !strings.Contains(pe.Key, "envv") {
		t.Fatalf("unknown key: %v", err)
	}
}
