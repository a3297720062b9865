"""Run untrusted commands under confine, from Python.

Standard library only. Every run is one `confine run --json` process: the
confine binary ($CONFINE_BIN, else on PATH, or given) does the confinement, and this
package builds its command line and parses its result. It fails closed:
no binary, a binary too old, or a host that cannot enforce a guarantee
raises SandboxUnavailable, and nothing runs unconfined.

    import confine
    r = confine.run(["echo", "hi"], workdir=".")
    print(r.stdout)             # hi
    r.stdout.data               # b"hi\n": the exact bytes
    confine.run(["make"], workdir=".", check=True,            # CommandFailed unless it exits 0
                on_output=lambda stream, chunk: print(chunk))   # live output
    confine.check().ok          # can this host confine runs?

`run` and `run_async` use a default Client; make your own for another
binary or an async concurrency limit:

    c = confine.Client("/opt/confine/bin/confine", max_concurrent=8)
    results = await asyncio.gather(*(c.run_async(["make", t], workdir=w) for t in targets))
"""

import threading
from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from . import _server
from ._client import BIN_ENV, MIN_JSON_API, Client, Env, Number, OutputCallback, PathArg
from ._errors import CommandFailed, ConfineError, Refused, SandboxUnavailable, Timeout
from ._result import (EXIT_CONFINE, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, EXIT_TIMEOUT, Availability, Connection, Denial,
                      Guarantee, GuaranteeStatus, Persistence, Result, SkippedBackend, Stream, Usage)

__version__ = "0.1.0"

__all__ = [
    "run", "run_async", "check", "Client", "default_client", "set_default_client",
    "Result", "Stream", "Usage", "Guarantee", "Denial", "Persistence", "Connection", "SkippedBackend", "Availability", "GuaranteeStatus",
    "ConfineError", "SandboxUnavailable", "Refused", "Timeout", "CommandFailed",
    "EXIT_TIMEOUT", "EXIT_CONFINE", "EXIT_NOT_EXECUTABLE", "EXIT_NOT_FOUND", "MIN_JSON_API", "BIN_ENV",
]

_default: Optional[Client] = None
_default_lock = threading.Lock()
# Clients for module-level calls with server=..., per socket ("": direct),
# with the default client they were made from.
_by_server: Dict[str, Tuple[Client, Client]] = {}


def default_client() -> Client:
    """The Client the module-level functions use: $CONFINE_BIN, else
    `confine` on PATH, no concurrency limit, unless set_default_client
    changed it."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Client()
        return _default


def _client_for(server: Any) -> Client:
    """The default client, or (server given) one of the same binary and
    concurrency limit that sends its runs to that server (False: runs
    directly), kept per server."""
    c = default_client()
    if server is None:
        return c
    key = _server.resolve_server(server) or ""
    with _default_lock:
        got = _by_server.get(key)
        if got is None or got[0] is not c:
            got = (c, Client(c._binary, max_concurrent=c.max_concurrent, server=server if key else False))
            _by_server[key] = got
        return got[1]


def set_default_client(client: Client) -> None:
    """Make the module-level functions use client (another binary, a
    concurrency limit for run_async)."""
    global _default
    if not isinstance(client, Client):
        raise TypeError("want a confine.Client, not %r" % (client,))
    with _default_lock:
        _default = client


def run(argv: Sequence[PathArg], *, workdir: PathArg, profile: str = "default", env: Optional[Env] = None,
        timeout: Optional[Number] = None, cpu_time: Optional[Number] = None, memory: Optional[int] = None,
        max_procs: Optional[int] = None, max_file_size: Optional[int] = None, max_open_files: Optional[int] = None,
        output_limit: Optional[int] = None, kill_grace: Optional[Number] = None, ro: Iterable[PathArg] = (),
        rw: Iterable[PathArg] = (), backend: str = "", input: Optional[bytes] = None,
        event_log: Optional[str] = None, cap: Optional[str] = None, raise_on_timeout: bool = False,
        on_output: Optional[OutputCallback] = None, check: bool = False, server: Any = None) -> Result:
    """Run argv confined in workdir and return its Result.

    workdir is the command's cwd and its only writable root besides a
    private temp dir and ``rw``; ``ro`` adds read+execute roots. profile is
    a built-in name (default, go, rust, node, python, c) or a TOML file.
    env adds variables: NAME: "value" sets one, NAME: None passes this
    process's value; the sanitiser refuses secrets (Refused). Limits:
    timeout, cpu_time and kill_grace in seconds; memory, max_file_size and
    output_limit (bytes kept per stream, head and tail) in bytes;
    max_procs, max_open_files. None keeps confine's default. input is fed
    to the command's stdin (default: empty). backend: "" or "auto",
    "namespaces", "core", "bwrap". event_log: a path or "off" (default:
    confine's). cap: a signed capability token (`confine cap mint`).

    on_output(stream, chunk) receives the output as it arrives ("stdout"
    or "stderr", the bytes as written); the Result still holds the kept
    head and tail. Result.stdout.data is the exact bytes, .text the text.

    A command that fails, dies of a signal or times out still returns a
    Result (exit_code, signal, timed_out; exit_status as the CLI's);
    with raise_on_timeout=True a timeout raises Timeout instead, and with
    check=True any non-zero exit_status raises CommandFailed (.result).
    Raises SandboxUnavailable when nothing could be confined (no binary,
    too old, a guarantee this host cannot enforce), Refused when confine
    refused the request (kind and exit_status as the CLI's: 127 not found,
    126 not executable, 125 otherwise), ValueError for bad arguments.

    server sends the run to a warm `confine serve` over its unix socket
    (no confine process is started here): True for the default socket, a
    socket path, False to run directly; None (the default) follows the
    default client (Client(server=...) or $CONFINE_SERVER). A server that
    does not answer, or runs as another uid, raises SandboxUnavailable:
    nothing runs without it.
    """
    return _client_for(server).run(
        argv, workdir=workdir, profile=profile, env=env, timeout=timeout, cpu_time=cpu_time, memory=memory,
        max_procs=max_procs, max_file_size=max_file_size, max_open_files=max_open_files,
        output_limit=output_limit, kill_grace=kill_grace, ro=ro, rw=rw, backend=backend, input=input,
        event_log=event_log, cap=cap, raise_on_timeout=raise_on_timeout, on_output=on_output, check=check)


async def run_async(argv: Sequence[PathArg], *, workdir: PathArg, profile: str = "default",
                    env: Optional[Env] = None, timeout: Optional[Number] = None, cpu_time: Optional[Number] = None,
                    memory: Optional[int] = None, max_procs: Optional[int] = None,
                    max_file_size: Optional[int] = None, max_open_files: Optional[int] = None,
                    output_limit: Optional[int] = None, kill_grace: Optional[Number] = None,
                    ro: Iterable[PathArg] = (), rw: Iterable[PathArg] = (), backend: str = "",
                    input: Optional[bytes] = None, event_log: Optional[str] = None, cap: Optional[str] = None,
                    raise_on_timeout: bool = False, on_output: Optional[OutputCallback] = None,
                    check: bool = False, server: Any = None) -> Result:
    """As run, in asyncio, under the default client's max_concurrent.
    Cancelling the task ends the run's whole process tree first."""
    return await _client_for(server).run_async(
        argv, workdir=workdir, profile=profile, env=env, timeout=timeout, cpu_time=cpu_time, memory=memory,
        max_procs=max_procs, max_file_size=max_file_size, max_open_files=max_open_files,
        output_limit=output_limit, kill_grace=kill_grace, ro=ro, rw=rw, backend=backend, input=input,
        event_log=event_log, cap=cap, raise_on_timeout=raise_on_timeout, on_output=on_output, check=check)


def check() -> Availability:
    """What this host enforces with the default client's binary; ok is
    False (with reason) when runs cannot be confined here."""
    return default_client().check()
