package policy

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/confine-sandbox/confine/spec"
)

// MinKeySize is the smallest engine key NewEngineWithKey and LoadKey
// accept, in bytes.
const MinKeySize = 32

// tokenPrefix starts every token; it names the format version, which is
// also the domain label of the token MAC.
const tokenPrefix = "cfn1"

const tokenDomain = "confine capability token v1"

// maxTokenLen bounds what ParseToken looks at.
const maxTokenLen = 8192

var b64 = base64.RawURLEncoding.Strict()

// NewEngineWithKey returns an engine whose key is key (at least MinKeySize
// bytes, copied), so that engines in several processes sharing the key
// accept each other's tokens. Errors wrap spec.ErrCapability.
func NewEngineWithKey(key []byte) (*Engine, error) {
	if len(key) < MinKeySize {
		return nil, fmt.Errorf("%w: engine key is %d bytes; want at least %d", spec.ErrCapability, len(key), MinKeySize)
	}
	return &Engine{key: bytes.Clone(key), revoked: map[string]bool{}}, nil
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

// capFields is the unambiguous encoding of a capability's fields that both
// the in-process seal and tokens sign: id, profile, profile digest and
// scope, each as a uvarint length and its bytes, then the expiry as a
// big-endian int64 of Unix nanoseconds (0: none).
func capFields(c *Cap) []byte {
	var b []byte
	for _, s := range []string{c.id, c.profile, c.digest, c.scope} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var exp int64
	if !c.expires.IsZero() {
		exp = c.expires.UnixNano()
	}
	return binary.BigEndian.AppendUint64(b, uint64(exp))
}

// parseCapFields is capFields' inverse; it refuses anything capFields
// could not have produced.
func parseCapFields(b []byte) (*Cap, error) {
	var fs [4]string
	for i := range fs {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return nil, errors.New("truncated field")
		}
		if k != len(binary.AppendUvarint(nil, n)) {
			return nil, errors.New("non-minimal length")
		}
		fs[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) != 8 {
		return nil, errors.New("bad expiry field")
	}
	c := &Cap{id: fs[0], profile: fs[1], digest: fs[2], scope: fs[3]}
	if exp := int64(binary.BigEndian.Uint64(b)); exp != 0 {
		c.expires = time.Unix(0, exp)
	}
	return c, nil
}

// Token serialises c for a caller in another process (confine run --cap):
// "cfn1." + base64url(fields) + "." + base64url(HMAC-SHA256), where the
// fields are the capability's id, profile name, profile digest, scope and
// expiry, and the MAC is keyed with the engine's key under a label naming
// the format version. Only a capability this engine minted or parsed, that
// is still valid, and that expires can be serialised: a token outlives the
// engine's revocation list, so it must run out by itself.
func (e *Engine) Token(c *Cap) (string, error) {
	switch {
	case c == nil:
		return "", fmt.Errorf("%w: no capability", spec.ErrCapability)
	case c.eng != e || !hmac.Equal(c.mac, e.seal(c)):
		return "", fmt.Errorf("%w: capability was not issued by this engine", spec.ErrCapability)
	case c.expires.IsZero():
		return "", fmt.Errorf("%w: capability %s never expires; mint it with a ttl to serialise it", spec.ErrCapability, c.id)
	case !time.Unix(0, c.expires.UnixNano()).Equal(c.expires):
		return "", fmt.Errorf("%w: capability %s expires too late to encode", spec.ErrCapability, c.id)
	case time.Now().After(c.expires):
		return "", fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	case e.isRevoked(c.id):
		return "", fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	payload := capFields(c)
	return tokenPrefix + "." + b64.EncodeToString(payload) + "." + b64.EncodeToString(e.mac(tokenDomain, payload)), nil
}

// ParseToken verifies a token made by Token with this engine's key and
// returns the capability it carries, bound to this engine (Authorize then
// checks its profile against this engine's). Every refusal wraps
// spec.ErrCapability and says why: malformed (not a confine token, another
// version, bad encoding), signature mismatch (tampered, or signed with
// another key: the two cannot be told apart), expired, or revoked in this
// engine (RevokeID).
func (e *Engine) ParseToken(tok string) (*Cap, error) {
	malformed := func(why string) (*Cap, error) {
		return nil, fmt.Errorf("%w: malformed capability token: %s", spec.ErrCapability, why)
	}
	if len(tok) > maxTokenLen {
		return malformed(fmt.Sprintf("longer than %d bytes", maxTokenLen))
	}
	// The base64 decoder skips '\r' and '\n' even in strict mode; only
	// the exact alphabet is accepted, so a token has one spelling.
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return malformed(fmt.Sprintf("byte %#02x at offset %d is not base64url", c, i))
		}
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return malformed("want three dot-separated parts")
	}
	if parts[0] != tokenPrefix {
		if strings.HasPrefix(parts[0], "cfn") {
			return malformed(fmt.Sprintf("version %q is not supported (want %q)", parts[0], tokenPrefix))
		}
		return malformed(fmt.Sprintf("does not start with %q", tokenPrefix+"."))
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return malformed("fields are not base64url")
	}
	mac, err := b64.DecodeString(parts[2])
	if err != nil {
		return malformed("signature is not base64url")
	}
	if len(mac) != 32 {
		return malformed("signature has the wrong length")
	}
	if !hmac.Equal(mac, e.mac(tokenDomain, payload)) {
		return nil, fmt.Errorf("%w: capability token signature does not match: it was altered, or signed with another key", spec.ErrCapability)
	}
	c, err := parseCapFields(payload)
	if err != nil {
		return malformed(err.Error())
	}
	switch {
	case c.expires.IsZero():
		return malformed("no expiry")
	case time.Now().After(c.expires):
		return nil, fmt.Errorf("%w: capability %s expired at %s", spec.ErrCapability, c.id, c.expires.Format(time.RFC3339))
	case e.isRevoked(c.id):
		return nil, fmt.Errorf("%w: capability %s was revoked", spec.ErrCapability, c.id)
	}
	c.eng = e
	c.mac = e.seal(c)
	return c, nil
}

// ApprovalKind is what an approval allows.
type ApprovalKind string

// Approval kinds (seed 000: network, package installs and new hosts need
// approval).
const (
	// ApprovalNewHost lets runs reach a host (Subject: the host name).
	ApprovalNewHost ApprovalKind = "new-host"
	// ApprovalPackageInstall lets runs install a package (Subject: the
	// package, e.g. "npm:left-pad@1.3.0").
	ApprovalPackageInstall ApprovalKind = "package-install"
)

// Approval is a recorded grant. Nothing in this version acts on it: the
// egress proxy, when it exists, consumes approvals by ID.
type Approval struct {
	ID      string       `json:"id"`
	Kind    ApprovalKind `json:"kind"`
	Subject string       `json:"subject"`
	Granted time.Time    `json:"granted"`
}

// Approve records an approval and returns it with a fresh ID. It refuses
// an unknown kind and a subject that is empty, longer than 1024 bytes, or
// holds control characters. Errors wrap spec.ErrInvalidSpec.
func (e *Engine) Approve(kind ApprovalKind, subject string) (Approval, error) {
	switch kind {
	case ApprovalNewHost, ApprovalPackageInstall:
	default:
		return Approval{}, fmt.Errorf("%w: unknown approval kind %q (want %q or %q)", spec.ErrInvalidSpec, kind, ApprovalNewHost, ApprovalPackageInstall)
	}
	if subject == "" || len(subject) > 1024 || strings.IndexFunc(subject, unicode.IsControl) >= 0 {
		return Approval{}, fmt.Errorf("%w: approval subject %q: want 1-1024 bytes without control characters", spec.ErrInvalidSpec, subject)
	}
	idb := make([]byte, 12)
	if _, err := rand.Read(idb); err != nil {
		return Approval{}, fmt.Errorf("approval id: %w", err)
	}
	a := Approval{ID: hex.EncodeToString(idb), Kind: kind, Subject: subject, Granted: time.Now().Round(0)}
	e.mu.Lock()
	e.approvals = append(e.approvals, a)
	e.mu.Unlock()
	return a, nil
}

// Approvals returns the recorded approvals in the order they were granted.
func (e *Engine) Approvals() []Approval {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Approval(nil), e.approvals...)
}
