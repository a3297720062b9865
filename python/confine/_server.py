"""Talk to a `confine serve` warm launcher instead of starting a confine
process per run (Client(server=...) or $CONFINE_SERVER).

The protocol is internal/serve's: one request per connection, a 4-byte
big-endian length and a JSON request; the server answers with one JSON
line, {"result": ...} and/or {"error": ...} (the object `confine run
--json` prints on a refusal), then closes. Shutting down our writing half
ends the run (the server kills its tree) and still brings its result. A
missing, dead or foreign server raises SandboxUnavailable: nothing ever
runs without it.
"""

import base64
import json
import os
import pwd
import socket
import struct
from typing import Any, Dict, List, Optional

from ._errors import SandboxUnavailable

PROTOCOL_VERSION = 1
_MAX_REQUEST = 16 << 20


def default_socket() -> str:
    """Where `confine serve` listens by default (as the Go side decides)."""
    d = os.environ.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(d):
        return os.path.join(d, "confine", "serve.sock")
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, "confine-%d" % os.geteuid(), "serve.sock")


def resolve_server(server: Any) -> Optional[str]:
    """The socket a Client sends its runs to: server=True or "default" is
    the default socket, a path is that socket, None reads $CONFINE_SERVER
    (unset or empty: no server)."""
    if server is None:
        server = os.environ.get("CONFINE_SERVER") or None
        if server is None:
            return None
    if server is True or server == "default":
        return default_socket()
    if server is False:
        return None
    return str(os.path.abspath(os.fspath(server)))


def default_event_log(flag: Optional[str]) -> str:
    """The event log a direct `confine run --event-log FLAG` would use
    ("": none)."""
    p = flag if flag is not None else os.environ.get("CONFINE_EVENT_LOG", "")
    if p == "off":
        return ""
    if p:
        return os.path.abspath(p)
    d = os.environ.get("XDG_STATE_HOME", "")
    if os.path.isabs(d):
        return os.path.join(d, "confine", "events.jsonl")
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home):
        try:
            home = pwd.getpwuid(os.geteuid()).pw_dir
        except KeyError:
            return ""
    return os.path.join(os.path.normpath(home), ".local", "state", "confine", "events.jsonl")


def build_request(argv: List[str], *, workdir: str, profile: str, env_flags: List[str],
                  limits: Dict[str, int], ro: List[str], rw: List[str], backend: str,
                  input: Optional[bytes], event_log: Optional[str], cap: Optional[str]) -> Dict[str, Any]:
    """The request for one run. The server builds the environment as
    `confine run` does from ours (only the variables the profile and the
    defaults pass through, and those env names, reach the command)."""
    spec: Dict[str, Any] = {"Program": argv[0], "Args": argv[1:], "Worktree": workdir,
                            "ReadOnly": ro, "ReadWrite": rw, "Limits": limits}
    if input is not None:
        spec["Stdin"] = base64.b64encode(input).decode()
    if "/" in profile:
        profile = os.path.abspath(profile)
    req: Dict[str, Any] = {"version": PROTOCOL_VERSION, "spec": spec, "profile": profile,
                           "cwd": os.getcwd(), "environ": ["%s=%s" % kv for kv in os.environ.items()],
                           "env_flags": env_flags}
    if backend:
        req["backend"] = backend
    log = default_event_log(event_log)
    if log:
        req["event_log"] = log
    if cap is not None:
        req["cap"] = cap
    return req


def connect(path: str) -> socket.socket:
    """A connection to the server at path, which must run as our euid."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError as e:
        s.close()
        raise SandboxUnavailable("no confine server at %s: %s (start one with `confine serve`); nothing was run"
                                 % (path, e.strerror or e), kind="no_server") from None
    try:
        _pid, uid, _gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                            struct.calcsize("3i")))
    except OSError as e:
        s.close()
        raise SandboxUnavailable("confine server at %s: its credentials: %s" % (path, e), kind="no_server") from None
    if uid != os.geteuid():
        s.close()
        raise SandboxUnavailable("the confine server at %s runs as uid %d, this client as uid %d; nothing was run"
                                 % (path, uid, os.geteuid()), kind="peer")
    return s


def send(s: socket.socket, req: Dict[str, Any]) -> None:
    body = json.dumps(req).encode()
    if len(body) > _MAX_REQUEST:
        raise ValueError("request of %d bytes is over the server's limit of %d (input too large?)"
                         % (len(body), _MAX_REQUEST))
    s.sendall(struct.pack(">I", len(body)) + body)


def receive(s: socket.socket, path: str) -> Dict[str, Any]:
    """The server's answer (read to EOF)."""
    chunks: List[bytes] = []
    while True:
        try:
            b = s.recv(1 << 16)
        except ConnectionResetError:
            # A server that refuses at once (busy) answers and closes
            # without reading our request: the kernel then resets the
            # connection after the answer. The answer came all the same.
            if not chunks:
                raise
            break
        if not b:
            break
        chunks.append(b)
    data = b"".join(chunks)
    if not data.strip():
        raise SandboxUnavailable("the confine server at %s closed the connection without an answer" % path,
                                 kind="no_server")
    try:
        d = json.loads(data)
    except ValueError as e:
        raise SandboxUnavailable("the confine server at %s answered garbage: %s" % (path, e), kind="no_server") \
            from None
    if not isinstance(d, dict) or ("result" not in d and "error" not in d):
        raise SandboxUnavailable("the confine server at %s answered neither a result nor an error" % path,
                                 kind="no_server")
    return d


def cancel(s: socket.socket) -> None:
    """Hang up our half: the server ends the run and answers."""
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass
