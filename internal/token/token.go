package token

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/confine-sandbox/confine/spec"
)

// capPrefix starts every capability token; it names the format version,
// which is also the domain label of the token MAC.
const capPrefix = "cfn1"

const capDomain = "confine capability token v1"

const (
	grantPrefix = "cfg1"
	grantDomain = "confine egress grant v1"
)

// MaxLen bounds what OpenCapability and OpenGrant look at.
const MaxLen = 8192

var b64 = base64.RawURLEncoding.Strict()

// Fields are what a capability token carries, and what a capability's
// in-process seal covers.
type Fields struct {
	ID, Profile, Digest, Scope string
	// Expires is zero for none.
	Expires time.Time
}

// Encode is the unambiguous encoding of f that both the in-process seal
// and tokens sign: id, profile, profile digest and scope, each as a
// uvarint length and its bytes, then the expiry as a big-endian int64 of
// Unix nanoseconds (0: none).
func (f Fields) Encode() []byte {
	var b []byte
	for _, s := range []string{f.ID, f.Profile, f.Digest, f.Scope} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	var exp int64
	if !f.Expires.IsZero() {
		exp = f.Expires.UnixNano()
	}
	return binary.BigEndian.AppendUint64(b, uint64(exp))
}

// DecodeFields is Encode's inverse; it refuses anything Encode could not
// have produced.
func DecodeFields(b []byte) (Fields, error) {
	var fs [4]string
	for i := range fs {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return Fields{}, errors.New("truncated field")
		}
		if k != len(binary.AppendUvarint(nil, n)) {
			return Fields{}, errors.New("non-minimal length")
		}
		fs[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) != 8 {
		return Fields{}, errors.New("bad expiry field")
	}
	f := Fields{ID: fs[0], Profile: fs[1], Digest: fs[2], Scope: fs[3]}
	if exp := int64(binary.BigEndian.Uint64(b)); exp != 0 {
		f.Expires = time.Unix(0, exp)
	}
	return f, nil
}

// Malformed is the refusal of a capability token that is not well formed;
// it wraps spec.ErrCapability.
func Malformed(why string) error {
	return fmt.Errorf("%w: malformed capability token: %s", spec.ErrCapability, why)
}

// Capability serialises a capability's encoded fields:
// "cfn1." + base64url(fields) + "." + base64url(HMAC-SHA256), the MAC keyed
// with k under a label naming the format version.
func (k Key) Capability(payload []byte) string {
	return capPrefix + "." + b64.EncodeToString(payload) + "." + b64.EncodeToString(k.MAC(capDomain, payload))
}

// OpenCapability checks a token made by Capability with k and returns the
// fields it signs. Every refusal wraps spec.ErrCapability and says why:
// malformed (not a confine token, another version, bad encoding), or
// signature mismatch (tampered, or signed with another key: the two
// cannot be told apart).
func (k Key) OpenCapability(tok string) ([]byte, error) {
	if len(tok) > MaxLen {
		return nil, Malformed(fmt.Sprintf("longer than %d bytes", MaxLen))
	}
	// The base64 decoder skips '\r' and '\n' even in strict mode; only
	// the exact alphabet is accepted, so a token has one spelling.
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return nil, Malformed(fmt.Sprintf("byte %#02x at offset %d is not base64url", c, i))
		}
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, Malformed("want three dot-separated parts")
	}
	if parts[0] != capPrefix {
		if strings.HasPrefix(parts[0], "cfn") {
			return nil, Malformed(fmt.Sprintf("version %q is not supported (want %q)", parts[0], capPrefix))
		}
		return nil, Malformed(fmt.Sprintf("does not start with %q", capPrefix+"."))
	}
	payload, err := b64.DecodeString(parts[1])
	if err != nil {
		return nil, Malformed("fields are not base64url")
	}
	mac, err := b64.DecodeString(parts[2])
	if err != nil {
		return nil, Malformed("signature is not base64url")
	}
	if len(mac) != 32 {
		return nil, Malformed("signature has the wrong length")
	}
	if !k.Verify(mac, capDomain, payload) {
		return nil, fmt.Errorf("%w: capability token signature does not match: it was altered, or signed with another key", spec.ErrCapability)
	}
	return payload, nil
}

// GrantError is the refusal of an egress grant; it wraps
// spec.ErrCapability.
func GrantError(format string, a ...any) error {
	return fmt.Errorf("%w: egress grant: %s", spec.ErrCapability, fmt.Sprintf(format, a...))
}

// Grant serialises an egress grant's encoded fields:
// "cfg1." + base64url(fields) + "." + base64url(HMAC-SHA256).
func (k Key) Grant(payload []byte) string {
	return grantPrefix + "." + b64.EncodeToString(payload) + "." + b64.EncodeToString(k.MAC(grantDomain, payload))
}

// OpenGrant checks a token made by Grant with k and returns the fields it
// signs. Errors are GrantErrors.
func (k Key) OpenGrant(tok string) ([]byte, error) {
	if len(tok) > MaxLen {
		return nil, GrantError("longer than %d bytes", MaxLen)
	}
	parts := strings.Split(tok, ".")
	if len(parts) != 3 || parts[0] != grantPrefix {
		return nil, GrantError("not a grant token (want %s.FIELDS.SIGNATURE)", grantPrefix)
	}
	payload, err1 := b64.DecodeString(parts[1])
	mac, err2 := b64.DecodeString(parts[2])
	if err1 != nil || err2 != nil || len(mac) != 32 {
		return nil, GrantError("malformed")
	}
	if !k.Verify(mac, grantDomain, payload) {
		return nil, GrantError("signature does not match: it was altered, or signed with another key")
	}
	return payload, nil
}
