package token

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/confine-sandbox/confine/spec"
)

func TestLoadKey(t *testing.T) {
	dir := t.TempDir()
	raw := make([]byte, MinKeySize)
	for i := range raw {
		raw[i] = 7 + byte(i)
	}
	write := func(name string, data []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	hexKey := write("hex", []byte(hex.EncodeToString(raw)+"\n"), 0o600)
	rawKey := write("raw", append([]byte{0xff}, raw...), 0o400)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(hexKey, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       []byte
		err        string
	}{
		{"hex", hexKey, raw, ""},
		{"raw", rawKey, append([]byte{0xff}, raw...), ""},
		{"group readable", write("g", []byte(hex.EncodeToString(raw)), 0o640), nil, "mode 0640"},
		{"world readable", write("w", []byte(hex.EncodeToString(raw)), 0o604), nil, "mode 0604"},
		{"short hex", write("sh", []byte("abcd"), 0o600), nil, "key is 2 bytes"},
		{"odd hex", write("oh", []byte("abc"), 0o600), nil, "odd number"},
		{"short raw", write("sr", []byte("not a key!"), 0o600), nil, "want at least 32"},
		{"too big", write("big", make([]byte, 5000), 0o600), nil, "larger than"},
		{"symlink", link, nil, "symlink"},
		{"directory", dir, nil, "not a regular file"},
		{"missing", filepath.Join(dir, "none"), nil, "no such file"},
	}
	if os.Geteuid() == 0 {
		p := write("foreign", []byte(hex.EncodeToString(raw)), 0o600)
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name, path string
			want       []byte
			err        string
		}{"other owner", p, nil, "owned by uid 65534"})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := LoadKey(tt.path)
			if tt.err != "" {
				if !errors.Is(err, spec.ErrCapability) || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("LoadKey = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil || string(k) != string(tt.want) {
				t.Fatalf("LoadKey = %x, %v", k, err)
			}
		})
	}
}
