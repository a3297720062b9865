package seatbelt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// macTree builds, in a temporary directory, the part of a macOS root the
// tests need: /private/{tmp,var,etc}, the top-level symlinks into
// /private (relative, as on macOS), a worktree under /var/folders, and
// symlink tricks. It returns a Canon whose resolver works inside the tree,
// as filepath.EvalSymlinks would on a Mac.
func macTree(t *testing.T) Canon {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"private/tmp", "private/etc/ssl", "private/var/folders/x1/abc/T/w", "Users/dev/.cargo", "Users/dev/dotfiles", "Users/dev/src"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"Users/dev/link-to-tmp":        "../../tmp",
		"Users/dev/src/app":            "/var/folders/x1/abc/T/w",
		"Users/dev/.npmrc":             "dotfiles/npmrc",
		"Users/dev/dangling":           "nowhere",
		"Users/dev/loop":               "loop",
		"private/var/folders/x1/abc/u": "../../../../../etc",
	}
	for _, rw := range rewrites {
		links[strings.TrimPrefix(rw.Link, "/")] = strings.TrimPrefix(rw.Target, "/")
	}
	for l, target := range links {
		if strings.HasPrefix(target, "/") {
			// An absolute target means the Mac's root: the tree's.
			target = root + target
		}
		if err := os.Symlink(target, filepath.Join(root, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "Users/dev/dotfiles/npmrc"), []byte("//registry/:_authToken=x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Canon{Eval: func(p string) (string, error) {
		r, err := filepath.EvalSymlinks(root + p)
		if err != nil {
			return "", err
		}
		if r == root {
			return "/", nil
		}
		if !strings.HasPrefix(r, root+"/") {
			return "", errors.New("resolved outside the tree: " + r)
		}
		return strings.TrimPrefix(r, root), nil
	}}
}

func TestCanonPath(t *testing.T) {
	c := macTree(t)
	tests := []struct{ in, want string }{
		{"/tmp", "/private/tmp"},
		{"/var/folders/x1/abc/T/w", "/private/var/folders/x1/abc/T/w"},
		{"/etc/ssl", "/private/etc/ssl"},
		{"/private/tmp", "/private/tmp"},
		{"/Users/dev/link-to-tmp", "/private/tmp"},
		{"/Users/dev/src/app", "/private/var/folders/x1/abc/T/w"},
		{"/Users/dev/src/app/../..", "/private/var/folders/x1/abc"}, // ".." after the symlink, as the kernel walks it
		{"/tmp/../etc", "/private/etc"},                             // .. after the symlink, as the kernel walks it
		{"/var/folders/x1/abc/u/ssl", "/private/etc/ssl"},
		{"/Users/dev/.npmrc", "/Users/dev/dotfiles/npmrc"},
	}
	for _, tt := range tests {
		got, err := c.Path(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Path(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"relative", "/Users/dev/dangling", "/Users/dev/loop", "/missing", "/tmp/missing"} {
		if got, err := c.Path(bad); !errors.Is(err, ErrCanonical) {
			t.Errorf("Path(%s) = %q, %v; want ErrCanonical", bad, got, err)
		}
	}
}

// TestRewritesFailClosed: a resolver that does not resolve macOS's
// top-level symlinks (identity) must not get a /tmp or /var path into a
// profile: every Rewrite is refused, never embedded unresolved.
func TestRewritesFailClosed(t *testing.T) {
	ident := Canon{Eval: func(p string) (string, error) { return p, nil }}
	for _, rw := range rewrites {
		for _, p := range []string{rw.Link, rw.Link + "/x"} {
			if got, err := ident.Path(p); !errors.Is(err, ErrCanonical) {
				t.Errorf("Path(%s) with an identity resolver = %q, %v; want ErrCanonical", p, got, err)
			}
		}
		if got, err := ident.Path(rw.Target + "/x"); err != nil || got != rw.Target+"/x" {
			t.Errorf("Path(%s/x) = %q, %v", rw.Target, got, err)
		}
	}
	weird := Canon{Eval: func(p string) (string, error) { return "relative/" + p, nil }}
	if _, err := weird.Path("/a"); !errors.Is(err, ErrCanonical) {
		t.Errorf("a relative resolution was accepted: %v", err)
	}
	ctl := Canon{Eval: func(p string) (string, error) { return p + "\n", nil }}
	if _, err := ctl.Path("/a"); err == nil {
		t.Errorf("a resolution with a newline was accepted")
	}
}

// TestCredentialDenies: every credential path under a root is denied
// whether it exists or not, cargo's files in a cargo home, and a
// symlinked credential file's target too.
func TestCredentialDenies(t *testing.T) {
	c := macTree(t)
	home := c.CredentialDenies("/Users/dev")
	for _, want := range []string{"/Users/dev/.npmrc", "/Users/dev/dotfiles/npmrc", "/Users/dev/.ssh", "/Users/dev/.aws", "/Users/dev/.cargo/credentials.toml"} {
		if !slices.Contains(home, want) {
			t.Errorf("CredentialDenies(/Users/dev) lacks %s: %v", want, home)
		}
	}
	if slices.Contains(home, "/Users/dev/credentials.toml") {
		t.Errorf("cargo's files denied outside a cargo home: %v", home)
	}
	cargo := c.CredentialDenies("/Users/dev/.cargo")
	for _, want := range []string{"/Users/dev/.cargo/credentials.toml", "/Users/dev/.cargo/credentials"} {
		if !slices.Contains(cargo, want) {
			t.Errorf("CredentialDenies(.cargo) lacks %s: %v", want, cargo)
		}
	}
	for _, p := range append(home, cargo...) {
		if err := CheckPath(p); err != nil {
			t.Error(err)
		}
	}
}
