package credpath

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestSplitReadGrant(t *testing.T) {
	tests := []struct {
		name     string
		files    []string
		root     string
		grants   []string
		excluded []string
		extra    []string // absolute paths to leave out too (confine's control plane), relative to base here
	}{
		{"no secrets", []string{"a/x", "b"}, "", []string{""}, nil, nil},
		{"top-level npmrc", []string{".npmrc", "src/main.js", "pkg.json"}, "", []string{"pkg.json", "src"}, []string{".npmrc"}, nil},
		{"nested docker config", []string{".docker/config.json", ".docker/other", "z"}, "", []string{".docker/other", "z"}, []string{".docker/config.json"}, nil},
		{"cargo home", []string{"credentials.toml", "registry/cache/x", "bin/cargo"}, ".cargo", []string{".cargo/bin", ".cargo/registry"}, []string{".cargo/credentials.toml"}, nil},
		{"home with ssh and aws", []string{".ssh/id_ed25519", ".aws/credentials", "code/x"}, "", []string{"code"}, []string{".aws", ".ssh"}, nil},
		{"symlinks are not granted", []string{".npmrc", "code/x", "@etc->/etc", "@notes.txt->.npmrc"}, "", []string{"code"}, []string{".npmrc"}, nil},
		{"dotfile-managed secret", []string{"dotfiles/npmrc", "dotfiles/vimrc", "@.npmrc->dotfiles/npmrc"}, "", []string{"dotfiles/vimrc"}, []string{".npmrc", "dotfiles/npmrc"}, nil},
		{"confine's config dir", []string{".config/confine/cap.key", ".config/gh/config.yml", "code/x"}, "", []string{".config/gh", "code"}, []string{".config/confine"}, []string{".config/confine"}},
		{"confine's state dir not made yet", []string{".local/share/x", "code/x"}, "", []string{".local/share", "code"}, []string{".local/state/confine"}, []string{".local/state/confine"}},
		{"a control path outside the root", []string{"code/x"}, "", []string{""}, nil, []string{"../elsewhere/confine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			root := filepath.Join(base, tt.root)
			for _, f := range tt.files {
				if link, target, ok := strings.Cut(f, "->"); ok && strings.HasPrefix(link, "@") {
					if err := os.Symlink(target, filepath.Join(root, link[1:])); err != nil {
						t.Fatal(err)
					}
					continue
				}
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var extra []string
			for _, e := range tt.extra {
				extra = append(extra, filepath.Join(base, e))
			}
			grants, excluded, err := SplitReadGrant(root, extra...)
			if err != nil {
				t.Fatal(err)
			}
			rel := func(ps []string) []string {
				var out []string
				for _, p := range ps {
					r, _ := filepath.Rel(base, p)
					if r == "." {
						r = ""
					}
					out = append(out, r)
				}
				return out
			}
			if !reflect.DeepEqual(rel(grants), tt.grants) || !reflect.DeepEqual(rel(excluded), tt.excluded) {
				t.Fatalf("grants %v excluded %v; want %v %v", rel(grants), rel(excluded), tt.grants, tt.excluded)
			}
		})
	}
}
