package spec

import (
	"errors"
	"time"
)

// Verdicts of a Connection.
const (
	VerdictAllowed = "allowed"
	VerdictDenied  = "denied"
)

// Connection is the audit record of one connection the command asked the
// egress proxy for (seed 000, "Network proxy records"): who asked, for
// what, what was decided and why, and how many bytes went each way.
type Connection struct {
	RunID  string `json:"run_id"`
	TaskID string `json:"task_id,omitempty"`
	JobID  string `json:"job_id,omitempty"`
	// PID is the process that opened the connection, when the launcher
	// could tell (0 otherwise).
	PID int `json:"pid,omitempty"`
	// Domain is the host name (or IP literal) the command asked for,
	// lower-cased; never a name the proxy resolved on its own.
	Domain string `json:"domain"`
	Port   int    `json:"port"`
	// Protocol is how it was asked: "http-connect", "http", "socks5";
	// "socks4" or "socks4a" (always refused); "unparsable" for a request
	// the proxy could not read (Peer and RequestBytes then say from where
	// and how much); "unknown" for a client the run did not make.
	Protocol string `json:"protocol"`
	// Peer is the client's address as the proxy saw it.
	Peer string `json:"peer,omitempty"`
	// RequestBytes counts the bytes of the request the proxy read before
	// deciding (a denied or unparsable request).
	RequestBytes int64 `json:"request_bytes,omitempty"`
	// Address is the address the proxy connected to ("" when denied
	// before connecting).
	Address string `json:"address,omitempty"`
	// BytesIn counts bytes from the remote host to the command,
	// BytesOut the other way, payload only.
	BytesIn  int64 `json:"bytes_in"`
	BytesOut int64 `json:"bytes_out"`
	// ApprovalID is the grant that allowed a host outside the allowlist.
	ApprovalID string `json:"approval_id,omitempty"`
	// ApprovalRequest identifies a denial, so that a person can grant it.
	ApprovalRequest string `json:"approval_request,omitempty"`
	Verdict         string `json:"verdict"`
	// Reason says why it was allowed (the matching allowlist entry) or
	// denied.
	Reason string `json:"reason"`
	// Hint, on a denial, is the profile change that would allow the
	// connection, for the rule that refused it.
	Hint  string    `json:"hint,omitempty"`
	Start time.Time `json:"start"`
	// Duration is from the request to the close of both directions.
	Duration time.Duration `json:"duration_ns"`
}

// CheckAuditID accepts "" or 1 to 128 bytes of printable ASCII without
// spaces: ids end up in logs and headers.
func CheckAuditID(s string) error {
	if len(s) > 128 {
		return errors.New("longer than 128 bytes")
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return errors.New("want printable ASCII without spaces")
		}
	}
	return nil
}
