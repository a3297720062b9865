package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

func TestHostOpCap(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		t.Fatal(err)
	}
	must := func(p Profile) {
		if err := e.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	must(Profile{Name: "t0", Tier: TierNone})
	must(Profile{Name: "t1-list", Tier: TierStructured, HostOps: []string{"list"}})
	revoked, _ := e.MintHostOp("host", "s", 0)
	e.RevokeID(revoked.ID())
	expired, _ := e.MintHostOp("host", "s", time.Nanosecond)
	time.Sleep(time.Millisecond)
	hostCap, _ := e.MintHostOp("host", "s", 0)
	roCap, _ := e.MintHostOp("host-readonly", "s", 0)
	listCap, _ := e.MintHostOp("t1-list", "s", 0)
	other, _ := NewEngine()
	foreign, _ := other.MintHostOp("host", "s", 0)
	forged := *hostCap
	forged.c.profile = "host-readonly"

	rows := []struct {
		name string
		cap  *HostOpCap
		op   HostOp
		ok   bool
	}{
		{"host-read", hostCap, OpReadFile, true},
		{"host-git-write", hostCap, OpGitWrite, true},
		{"readonly-read", roCap, OpSearch, true},
		{"readonly-write", roCap, OpWriteFile, false},
		{"readonly-patch", roCap, OpApplyPatch, false},
		{"readonly-git-write", roCap, OpGitWrite, false},
		{"file-profile-list", listCap, OpList, true},
		{"file-profile-read", listCap, OpReadFile, false},
		{"unknown-op", hostCap, "exec", false},
		{"nil", nil, OpReadFile, false},
		{"zero", &HostOpCap{}, OpReadFile, false},
		{"forged", &forged, OpReadFile, false},
		{"revoked", revoked, OpReadFile, false},
		{"expired", expired, OpReadFile, false},
		{"foreign-engine-ok", foreign, OpReadFile, true},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			_, err := AuthorizeHostOp(r.cap, r.op)
			if (err == nil) != r.ok {
				t.Fatalf("AuthorizeHostOp = %v, want ok=%v", err, r.ok)
			}
			if err != nil && !errors.Is(err, spec.ErrCapability) {
				t.Fatalf("%v does not wrap ErrCapability", err)
			}
		})
	}
	// Tier 0 and tier 2 profiles get no host capability.
	for _, p := range []string{"t0", "default"} {
		if _, err := e.MintHostOp(p, "s", 0); !errors.Is(err, spec.ErrCapability) {
			t.Errorf("MintHostOp(%s) = %v, want ErrCapability", p, err)
		}
	}
	// A run capability is no host capability, nor the reverse: a tier 1
	// profile cannot run a command.
	if _, err := Authorize(&hostCap.c, "host"); err == nil {
		t.Error("a HostOpCap's inner Cap authorised a run")
	}
	if c, err := e.Mint("host", "s", 0); err == nil {
		if p, err := Authorize(c, "host"); err == nil {
			if err := CheckTier(p.Tier); err == nil {
				t.Error("tier 1 profile passes CheckTier for a run")
			}
		}
	}
	// A token for a tier 1 profile converts; one for tier 2 does not.
	c1, _ := e.Mint("host", "s", time.Hour)
	tok, err := e.Token(c1)
	if err != nil {
		t.Fatal(err)
	}
	if h, err := e.HostOpFromToken(tok); err != nil {
		t.Fatal(err)
	} else if _, err := AuthorizeHostOp(h, OpReadFile); err != nil {
		t.Fatal(err)
	}
	c2, _ := e.Mint("default", "s", time.Hour)
	tok2, _ := e.Token(c2)
	if _, err := e.HostOpFromToken(tok2); !errors.Is(err, spec.ErrCapability) {
		t.Errorf("tier 2 token: %v", err)
	}
}

func TestHostOpsProfileFile(t *testing.T) {
	dir := t.TempDir()
	rows := []struct{ body, err string }{
		{"tier = 1\nhost_ops = [\"read_file\", \"git_read\"]\n", ""},
		{"tier = 1\nhost_ops = [\"exec\"]\n", "unknown host operation"},
		{"tier = 2\nhost_ops = [\"read_file\"]\n", "tier 1 profile"},
	}
	for i, r := range rows {
		p := filepath.Join(dir, "p"+string(rune('a'+i))+".toml")
		if err := os.WriteFile(p, []byte(r.body), 0o644); err != nil {
			t.Fatal(err)
		}
		prof, err := loadProfile(p)
		if r.err == "" {
			if err != nil || len(prof.HostOps) != 2 {
				t.Errorf("%q: %v %+v", r.body, err, prof)
			}
		} else if err == nil || !strings.Contains(err.Error(), r.err) {
			t.Errorf("%q: %v, want %q", r.body, err, r.err)
		}
	}
}
