package policy

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/internal/token"
	"github.com/confine-sandbox/confine/spec"
)

func testKey(b byte) []byte {
	k := make([]byte, token.MinKeySize)
	for i := range k {
		k[i] = b + byte(i)
	}
	return k
}

func keyedEngine(t *testing.T, b byte) *Engine {
	t.Helper()
	e, err := NewEngineWithKey(testKey(b))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestTokenRoundTrip(t *testing.T) {
	a, b := keyedEngine(t, 1), keyedEngine(t, 1)
	c, err := a.Mint("default", "repo:x job:7", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "cfn1.") {
		t.Fatalf("token %q", tok)
	}
	// Another process with the same key.
	got, err := b.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID() != c.ID() || got.Profile() != c.Profile() || got.Scope() != c.Scope() ||
		got.ProfileDigest() != c.ProfileDigest() || !got.Expires().Equal(c.Expires()) {
		t.Fatalf("parsed %+v, minted %+v", got, c)
	}
	if p, err := Authorize(got, "default"); err != nil || p.Name != "default" {
		t.Fatalf("Authorize(parsed) = %v, %v", p.Name, err)
	}
	if _, err := Authorize(got, "other"); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("profile mismatch: %v", err)
	}
	// The parsed capability serialises to the same token.
	again, err := b.Token(got)
	if err != nil || again != tok {
		t.Fatalf("re-serialised %q, %v; want %q", again, err, tok)
	}
}

func TestTokenRefusals(t *testing.T) {
	e := keyedEngine(t, 1)
	c, err := e.Mint("default", "s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	short, err := e.Mint("default", "s", 30*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	expiring, err := e.Token(short)
	if err != nil {
		t.Fatal(err)
	}
	revokedCap, _ := e.Mint("default", "s", time.Hour)
	revoked, err := e.Token(revokedCap)
	if err != nil {
		t.Fatal(err)
	}
	e.RevokeID(revokedCap.ID())
	time.Sleep(50 * time.Millisecond)

	parts := strings.Split(tok, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	payload[len(payload)-9] ^= 1 // a byte of the scope
	tests := []struct {
		name, tok, why string
		eng            *Engine
	}{
		{"empty", "", "malformed", e},
		{"garbage", "hello", "malformed", e},
		{"two parts", parts[0] + "." + parts[1], "three dot-separated parts", e},
		{"four parts", tok + ".x", "three dot-separated parts", e},
		{"other version", "cfn2." + parts[1] + "." + parts[2], `version "cfn2"`, e},
		{"not ours", "eyJ." + parts[1] + "." + parts[2], "does not start with", e},
		{"bad base64", parts[0] + ".!!." + parts[2], "not base64url", e},
		{"padded base64", parts[0] + "." + parts[1] + "=." + parts[2], "not base64url", e},
		{"newline inside", parts[0] + "." + parts[1][:4] + "\n" + parts[1][4:] + "." + parts[2], "not base64url", e},
		{"carriage return inside", parts[0] + "." + parts[1] + "." + parts[2][:4] + "\r" + parts[2][4:], "not base64url", e},
		{"trailing newline", tok + "\n", "not base64url", e},
		{"short mac", parts[0] + "." + parts[1] + "." + parts[2][:8], "wrong length", e},
		{"tampered fields", parts[0] + "." + flip(parts[1], 3) + "." + parts[2], "signature does not match", e},
		{"tampered payload", parts[0] + "." + base64.RawURLEncoding.EncodeToString(payload) + "." + parts[2], "signature does not match", e},
		{"tampered mac", parts[0] + "." + parts[1] + "." + flip(parts[2], 5), "signature does not match", e},
		{"wrong key", tok, "signature does not match", keyedEngine(t, 2)},
		{"expired", expiring, "expired at", e},
		{"revoked", revoked, "was revoked", e},
		{"too long", strings.Repeat("a", token.MaxLen+1), "longer than", e},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := tt.eng.ParseToken(tt.tok)
			if c != nil || !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("ParseToken = %v, %v; want ErrCapability with %q", c, err, tt.why)
			}
		})
	}
	// The revoked id is refused in this engine only.
	if _, err := keyedEngine(t, 1).ParseToken(revoked); err != nil {
		t.Fatalf("another engine refuses a token revoked elsewhere: %v", err)
	}
}

func TestTokenMinting(t *testing.T) {
	e := keyedEngine(t, 1)
	forever, _ := e.Mint("default", "s", 0)
	if _, err := e.Token(forever); !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), "never expires") {
		t.Fatalf("non-expiring: %v", err)
	}
	other := keyedEngine(t, 1)
	c, _ := other.Mint("default", "s", time.Hour)
	if _, err := e.Token(c); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("another engine's capability: %v", err)
	}
	if _, err := e.Token(nil); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("nil: %v", err)
	}
	if _, err := e.Token(&Cap{}); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("zero: %v", err)
	}
	c, _ = e.Mint("default", "s", time.Hour)
	e.Revoke(c)
	if _, err := e.Token(c); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("revoked: %v", err)
	}
	if _, err := NewEngineWithKey(make([]byte, token.MinKeySize-1)); !errors.Is(err, spec.ErrCapability) {
		t.Fatalf("short key: %v", err)
	}
}

func TestRegisteredProfiles(t *testing.T) {
	path := writeProfile(t, "ci.toml", fullProfile)
	p, err := loadProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	minter, runner := keyedEngine(t, 1), keyedEngine(t, 1)
	if _, err := minter.Mint(p.Name, "s", time.Hour); !errors.Is(err, spec.ErrInvalidSpec) {
		t.Fatalf("minting an unregistered profile: %v", err)
	}
	if err := minter.Register(p); err != nil {
		t.Fatal(err)
	}
	if err := minter.Register(p); err != nil {
		t.Fatalf("registering the same profile again: %v", err)
	}
	changed := p
	changed.Limits.MaxProcs = 1
	if err := minter.Register(changed); !errors.Is(err, spec.ErrInvalidSpec) {
		t.Fatalf("registering other content under the name: %v", err)
	}
	builtin := p
	builtin.Name = "default"
	if err := minter.Register(builtin); !errors.Is(err, spec.ErrInvalidSpec) {
		t.Fatalf("shadowing a built-in: %v", err)
	}
	c, err := minter.Mint(p.Name, "s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Authorize(c, ""); err != nil || got.Name != p.Name || got.Source != path {
		t.Fatalf("Authorize = %+v, %v", got, err)
	}
	tok, err := minter.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := runner.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	// The runner does not know the profile yet.
	if _, err := Authorize(parsed, p.Name); !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), "does not know") {
		t.Fatalf("unknown profile: %v", err)
	}
	// The runner loaded an edited file under the same name.
	if err := runner.Register(changed); err != nil {
		t.Fatal(err)
	}
	if _, err := Authorize(parsed, p.Name); !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), "profile changed") {
		t.Fatalf("edited profile: %v", err)
	}
	fresh := keyedEngine(t, 1)
	if err := fresh.Register(p); err != nil {
		t.Fatal(err)
	}
	parsed, err = fresh.ParseToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := Authorize(parsed, p.Name); err != nil || got.Digest() != p.Digest() {
		t.Fatalf("Authorize = %v", err)
	}
}

func TestApprovals(t *testing.T) {
	e := keyedEngine(t, 1)
	a, err := e.approve(approvalNewHost, "proxy.golang.org")
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.approve("package-install", "npm:left-pad@1.3.0")
	if err != nil {
		t.Fatal(err)
	}
	if a.ID == "" || a.ID == b.ID || a.Kind != approvalNewHost || b.Kind != approvalPackageInstall || a.Granted.IsZero() {
		t.Fatalf("approvals %+v %+v", a, b)
	}
	got := e.grantedApprovals()
	if len(got) != 2 || got[0] != a || got[1] != b {
		t.Fatalf("Approvals = %+v", got)
	}
	got[0].Subject = "changed"
	if e.grantedApprovals()[0].Subject != a.Subject {
		t.Fatal("Approvals returned the engine's own slice")
	}
	for _, bad := range []struct {
		kind    approvalKind
		subject string
	}{{"network", "x"}, {"", "x"}, {approvalNewHost, ""}, {approvalNewHost, "a\nb"}, {approvalNewHost, strings.Repeat("x", 1025)}} {
		if _, err := e.approve(bad.kind, bad.subject); !errors.Is(err, spec.ErrInvalidSpec) {
			t.Errorf("Approve(%q, %q) = %v", bad.kind, bad.subject, err)
		}
	}
	if len(e.grantedApprovals()) != 2 {
		t.Fatal("a refused approval was recorded")
	}
}

// TestTokenMaxTTL: a ttl over maxTTL is refused at minting, and a token
// signed with the right key but a later expiry (minted without the bound)
// is refused when parsed; maxTTL itself is accepted.
func TestTokenMaxTTL(t *testing.T) {
	e := keyedEngine(t, 1)
	for _, tt := range []struct {
		ttl time.Duration
		ok  bool
	}{{time.Hour, true}, {maxTTL, true}, {maxTTL + time.Second, false}, {100000 * time.Hour, false}} {
		c, err := e.Mint("default", "s", tt.ttl)
		if tt.ok != (err == nil) || (err != nil && !errors.Is(err, spec.ErrInvalidSpec)) {
			t.Fatalf("Mint(ttl %v) = %v, %v; want ok %v", tt.ttl, c, err, tt.ok)
		}
		if tt.ok {
			tok, err := e.Token(c)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.ParseToken(tok); err != nil {
				t.Fatalf("ttl %v: %v", tt.ttl, err)
			}
		}
	}
	c, err := e.Mint("default", "s", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c.expires = time.Now().Add(100000 * time.Hour).Round(0)
	c.mac = e.seal(c)
	tok, err := e.Token(c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.ParseToken(tok); !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), "more than the maximum") {
		t.Fatalf("a token expiring in 100000h parsed: %v", err)
	}
}

// Every capability Mint issues serialises to a token ParseToken accepts:
// a scope that would not fit is refused at Mint (the fuzzer found a 25 KB
// scope minted, serialised, then refused as malformed).
func TestTokenMaxScope(t *testing.T) {
	e := keyedEngine(t, 1)
	for _, tt := range []struct {
		n  int
		ok bool
	}{{0, true}, {maxScope, true}, {maxScope + 1, false}, {25314, false}} {
		scope := strings.Repeat("\xff", tt.n)
		c, err := e.Mint("default", scope, time.Hour)
		if !tt.ok {
			if !errors.Is(err, spec.ErrInvalidSpec) {
				t.Fatalf("Mint(%d-byte scope) = %v, want ErrInvalidSpec", tt.n, err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		tok, err := e.Token(c)
		if err != nil {
			t.Fatal(err)
		}
		if p, err := e.ParseToken(tok); err != nil || p.Scope() != scope {
			t.Fatalf("%d-byte scope: %v", tt.n, err)
		}
	}
}
