// Package token holds the cryptography of policy's capabilities and egress
// grants: the engine key (random, or loaded from a private file), the MACs
// that seal capabilities in memory, and the wire formats of capability and
// grant tokens. It knows nothing of profiles: what a token carries, and
// whether a capability is valid, is policy's.
package token

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/confine-sandbox/confine/spec"
)

// MinKeySize is the smallest engine key NewKey and LoadKey accept, in
// bytes.
const MinKeySize = 32

// Key is an engine's key. It never leaves the process.
type Key struct{ b []byte }

// RandomKey returns a fresh random key of MinKeySize bytes.
func RandomKey() (Key, error) {
	k := make([]byte, MinKeySize)
	if _, err := rand.Read(k); err != nil {
		return Key{}, err
	}
	return Key{k}, nil
}

// NewKey returns key (at least MinKeySize bytes, copied) as a Key. Errors
// wrap spec.ErrCapability.
func NewKey(key []byte) (Key, error) {
	if len(key) < MinKeySize {
		return Key{}, fmt.Errorf("%w: engine key is %d bytes; want at least %d", spec.ErrCapability, len(key), MinKeySize)
	}
	return Key{bytes.Clone(key)}, nil
}

// MAC is the HMAC-SHA256 of msg under k, with domain (a label naming what
// is signed, and its version) in front so that one kind of signature can
// never pass for another.
func (k Key) MAC(domain string, msg []byte) []byte {
	m := hmac.New(sha256.New, k.b)
	m.Write([]byte(domain))
	m.Write([]byte{0})
	m.Write(msg)
	return m.Sum(nil)
}

// Verify reports whether mac is k's MAC of msg under domain, in constant
// time.
func (k Key) Verify(mac []byte, domain string, msg []byte) bool {
	return hmac.Equal(mac, k.MAC(domain, msg))
}

// NewID returns a fresh random identifier: 12 bytes, hex-encoded.
func NewID() (string, error) {
	idb := make([]byte, 12)
	if _, err := rand.Read(idb); err != nil {
		return "", err
	}
	return hex.EncodeToString(idb), nil
}

// LoadKey reads an engine key from a file that only its owner can read:
// a regular file (not a symlink), owned by the calling user (effective
// uid), mode 0600 or stricter, at most 4 KiB. Content that is entirely hex
// digits (surrounding whitespace ignored) is hex-decoded; anything else is
// taken as raw bytes, exactly as stored. Either way the key must be at
// least MinKeySize bytes. Errors wrap spec.ErrCapability.
//
// Generate one with: head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > key; chmod 600 key
func LoadKey(path string) ([]byte, error) {
	fail := func(format string, args ...any) ([]byte, error) {
		return nil, fmt.Errorf("%w: engine key %s: %s", spec.ErrCapability, path, fmt.Sprintf(format, args...))
	}
	f, err := openKey(path)
	if err != nil {
		if errors.Is(err, errKeySymlink) {
			return fail("is a symlink")
		}
		return fail("%v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fail("%v", err)
	}
	if !st.Mode().IsRegular() {
		return fail("not a regular file")
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fail("mode %#o lets others read or write it; chmod 600 it", perm)
	}
	if uid, ok := fileOwner(st); !ok {
		return fail("cannot tell its owner")
	} else if uid != os.Geteuid() {
		return fail("owned by uid %d, not by this user (uid %d)", uid, os.Geteuid())
	}
	data, err := io.ReadAll(io.LimitReader(f, 4097))
	if err != nil {
		return fail("%v", err)
	}
	if len(data) > 4096 {
		return fail("larger than 4096 bytes")
	}
	key := data
	if t := bytes.TrimSpace(data); len(t) > 0 && isHex(t) {
		if len(t)%2 != 0 {
			return fail("odd number of hex digits")
		}
		key = make([]byte, len(t)/2)
		if _, err := hex.Decode(key, t); err != nil {
			return fail("%v", err)
		}
	}
	if len(key) < MinKeySize {
		return fail("key is %d bytes; want at least %d", len(key), MinKeySize)
	}
	return key, nil
}

func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
