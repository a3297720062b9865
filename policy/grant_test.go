package policy

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

func TestEgressGrant(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	tok, g, err := e.GrantEgress(EgressGrant{Request: "req-1", Task: "t1", Host: "denied.test", Port: 443}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.ParseEgressGrant(tok)
	if err != nil || got != g || !strings.HasPrefix(g.ID, "apv-") {
		t.Fatalf("round trip: %+v %v, want %+v", got, err, g)
	}
	if !g.Matches("denied.test", 443) || g.Matches("denied.test", 80) || g.Matches("x.denied.test", 443) {
		t.Fatal("Matches")
	}
	c, err := e.Mint("default", "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if gs, err := VerifyGrants(c, []string{tok}, "t1"); err != nil || len(gs) != 1 {
		t.Fatalf("VerifyGrants: %v %v", gs, err)
	}
	other, _ := NewEngine()
	oc, _ := other.Mint("default", "s", 0)
	parts := strings.Split(tok, ".")
	refused := []struct {
		name string
		err  func() error
		msg  string
	}{
		{"out of scope", func() error { _, err := VerifyGrants(c, []string{tok}, "t2"); return err }, `is for task "t1"`},
		{"foreign key", func() error { _, err := VerifyGrants(oc, []string{tok}, "t1"); return err }, "signature does not match"},
		{"altered fields", func() error {
			_, err := e.ParseEgressGrant(parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"id":"apv-x","task":"t1","host":"evil.test","port":443,"expires":"2999-01-01T00:00:00Z"}`)) + "." + parts[2])
			return err
		}, "signature does not match"},
		{"altered signature", func() error {
			// The signature's first character carries six bits of it:
			// any other character alters the signature (the last one
			// may carry padding bits only, and "AA" may be what is there).
			sig := []byte(parts[2])
			sig[0] = map[bool]byte{true: 'B', false: 'A'}[sig[0] == 'A']
			_, err := e.ParseEgressGrant(parts[0] + "." + parts[1] + "." + string(sig))
			return err
		}, ""},
		{"not a grant", func() error { _, err := e.ParseEgressGrant("cfn1.a.b"); return err }, "not a grant token"},
		{"expired", func() error {
			defer func(f func() time.Time) { grantNow = f }(grantNow)
			grantNow = func() time.Time { return g.Expires }
			_, err := e.ParseEgressGrant(tok)
			return err
		}, "expired"},
		{"revoked", func() error {
			e2, _ := NewEngineWithKey(make([]byte, 32))
			t2, g2, _ := e2.GrantEgress(EgressGrant{Task: "t1", Host: "a.test", Port: 1}, time.Hour)
			e2.RevokeID(g2.ID)
			_, err := e2.ParseEgressGrant(t2)
			return err
		}, "revoked"},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err()
			if !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("err = %v, want ErrCapability containing %q", err, tt.msg)
			}
		})
	}
	// An expired grant matches nothing at connection time either.
	defer func(f func() time.Time) { grantNow = f }(grantNow)
	grantNow = func() time.Time { return g.Expires.Add(time.Second) }
	if g.Matches("denied.test", 443) {
		t.Fatal("an expired grant matched")
	}
}

func TestEgressGrantFields(t *testing.T) {
	e, _ := NewEngine()
	for _, tt := range []struct {
		g   EgressGrant
		ttl time.Duration
		msg string
	}{
		{EgressGrant{Host: "a.test", Port: 443}, 0, "ttl"},
		{EgressGrant{Host: "a.test", Port: 443}, 31 * 24 * time.Hour, "ttl"},
		{EgressGrant{Host: "*.a.test", Port: 443}, time.Hour, "not allowed"},
		{EgressGrant{Host: "A.test", Port: 443}, time.Hour, "not normalised"},
		{EgressGrant{Host: "a.test", Port: 0}, time.Hour, "port"},
		{EgressGrant{Host: "group:maven", Port: 443}, time.Hour, "unknown registry group"},
		{EgressGrant{Host: "a.test", Port: 443, Task: "has space"}, time.Hour, "task"},
	} {
		if _, _, err := e.GrantEgress(tt.g, tt.ttl); !errors.Is(err, spec.ErrInvalidSpec) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%+v ttl %v: %v, want %q", tt.g, tt.ttl, err, tt.msg)
		}
	}
	_, g, err := e.GrantEgress(EgressGrant{Host: "group:npm", Port: 443}, time.Hour)
	if err != nil || !g.Matches("registry.npmjs.org", 443) || g.Matches("pypi.org", 443) {
		t.Fatalf("group grant %+v %v", g, err)
	}
}
