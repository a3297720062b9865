// Package serve is the warm launcher's transport: a per-user server on a
// unix socket (mode 0600, in a directory of the user's with mode 0700)
// that takes one run request per connection, checks the peer's uid with
// SO_PEERCRED, caps how many runs go at once, cancels a run whose client
// hangs up, and writes back one response. What a request runs is up to
// the Handler (the CLI's, which calls the library as `confine run` does);
// this package never launches anything itself.
//
// Wire format, one exchange per connection:
//
//	client -> server: a 4-byte big-endian length, then that many bytes of
//	                  a JSON Request; with it, as SCM_RIGHTS, optionally
//	                  the caller's stdin (a pipe), stdout and stderr.
//	                  Then nothing: the client's EOF (close or shutdown of
//	                  its writing half) ends the run.
//	server -> client: one JSON Response line, then EOF.
package serve

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/confine-sandbox/confine/spec"
)

// Version is the request format's revision; a server refuses others.
const Version = 1

// MaxRequest bounds one request (the spec's Stdin included).
const MaxRequest = 16 << 20

// Sentinel errors, for errors.Is.
var (
	// ErrNoServer: nothing serves at the socket (missing, dead,
	// unreachable). A client never falls back to running by itself.
	ErrNoServer = errors.New("no confine server")
	// ErrPeer: the other end of the socket runs as another uid.
	ErrPeer = errors.New("peer runs as another uid")
	// ErrUnsafeDir: the socket's directory is not the user's own with
	// mode 0700.
	ErrUnsafeDir = errors.New("unsafe socket directory")
	// ErrProtocol: a malformed, oversized or unexpected message.
	ErrProtocol = errors.New("confine server protocol")
)

// Request is one run, as the CLI built it from its flags and the caller's
// environment.
type Request struct {
	Version int `json:"version"`
	// Spec is the spec.CommandSpec as the library takes it; its Env holds
	// the caller's values of the variables the run passes, no others.
	Spec spec.CommandSpec `json:"spec"`
	// Profile is the profile's name, or an absolute path to its file.
	Profile string `json:"profile"`
	// Backend is the CLI's --backend ("" or "auto": the library's choice).
	Backend string `json:"backend,omitempty"`
	// CapToken and CapKey are --cap and the key file (absolute) that
	// verifies it and the egress grants; empty: the server mints one.
	CapToken string `json:"cap,omitempty"`
	CapKey   string `json:"cap_key,omitempty"`
	// EventLog is the log the run is recorded in (absolute; "": none).
	EventLog string `json:"event_log,omitempty"`
	// Live streams the output into the stdout and stderr passed with the
	// request, at most LiveLimit bytes each (0: unlimited), as a direct
	// `confine run` without --json does; the result keeps it too.
	Live      bool  `json:"live,omitempty"`
	LiveLimit int64 `json:"live_limit,omitempty"`
	// CallerEnv are the caller's values of the variables the library
	// consults besides the spec's Env (PATH, TMPDIR, HOME, XDG_CACHE_HOME,
	// CONFINE_CACHE_DIR, GOCACHE, a profile's credential routes). The server's own
	// environment is never used in their place.
	CallerEnv map[string]string `json:"caller_env,omitempty"`
	// Cwd is the caller's working directory, absolute: relative paths of
	// the request are taken from it.
	Cwd string `json:"cwd,omitempty"`
	// Environ and EnvFlags, when Environ is set and Spec.Env is not, let
	// the server build the environment as `confine run` does: Environ
	// stands for the caller's environment (only the variables the
	// profile and the defaults pass through, and the NAMEs of EnvFlags,
	// are read from it), EnvFlags are --env's NAME or NAME=VALUE. Environ
	// then also answers for CallerEnv, and recipes discover their
	// toolchain in it (policy.LookupIn). The Python client always sends
	// it (it resolves no profile itself); the CLI, for recipe profiles.
	Environ  []string `json:"environ,omitempty"`
	EnvFlags []string `json:"env_flags,omitempty"`
	// Files names the descriptors passed with the request, in order:
	// "stdin", "stdout", "stderr".
	Files []string `json:"files,omitempty"`
}

// Refusal is what `confine run --json` prints when confine refuses or
// fails before (or instead of) the command's own outcome: the same
// {"error": {...}} object, plus kind "cancelled" (the client hung up) and
// "busy" (the server's queue is full).
type Refusal struct {
	Kind       string   `json:"kind"`
	Message    string   `json:"message"`
	ExitStatus int      `json:"exit_status"`
	Guarantees []string `json:"guarantees,omitempty"`
	// Denials holds what was refused with the grant that would allow it,
	// when a grant would have (a program outside the sandbox's view).
	Denials []spec.Denial `json:"denials,omitempty"`
}

// Response is the server's answer: the run's result whenever the library
// returned one (a refused run has one too, with the fields it got), and
// the refusal when the run failed.
type Response struct {
	Error  *Refusal            `json:"error,omitempty"`
	Result *spec.CommandResult `json:"result,omitempty"`
}

// writeFrame writes b with its length prefix.
func writeFrame(w io.Writer, b []byte) error {
	if len(b) > MaxRequest {
		return fmt.Errorf("%w: request of %d bytes is over the limit of %d", ErrProtocol, len(b), MaxRequest)
	}
	buf := make([]byte, 4+len(b))
	binary.BigEndian.PutUint32(buf, uint32(len(b)))
	copy(buf[4:], b)
	_, err := w.Write(buf)
	return err
}

// decodeRequest parses one request's JSON, refusing unknown fields (a
// client newer than the server must not have a field silently ignored).
func decodeRequest(b []byte) (*Request, error) {
	var r Request
	// Blanks after the object cost encoding/json about 12 ns a byte;
	// here, about one.
	b = bytes.TrimRight(b, " \t\r\n")
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("%w: bad request: %v", ErrProtocol, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: bad request: data after the JSON object", ErrProtocol)
	}
	if r.Version != Version {
		return nil, fmt.Errorf("%w: request version %d, this server speaks %d", ErrProtocol, r.Version, Version)
	}
	for _, f := range r.Files {
		switch f {
		case "stdin", "stdout", "stderr":
		default:
			return nil, fmt.Errorf("%w: unknown passed file %q", ErrProtocol, f)
		}
	}
	return &r, nil
}

// writeResponse writes resp as one line; the result is written as `run
// --json` writes it (spec.CommandResult.WriteJSON).
func writeResponse(w io.Writer, resp Response) error {
	if _, err := io.WriteString(w, "{"); err != nil {
		return err
	}
	sep := ""
	if resp.Error != nil {
		b, err := json.Marshal(resp.Error)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, `"error":%s`, b); err != nil {
			return err
		}
		sep = ","
	}
	if resp.Result != nil {
		if _, err := io.WriteString(w, sep+`"result":`); err != nil {
			return err
		}
		// WriteJSON ends with a newline, which JSON allows here.
		if err := resp.Result.WriteJSON(w); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "}\n")
	return err
}
