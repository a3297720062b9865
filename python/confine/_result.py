"""The run result and the host's availability, as typed dataclasses.

Field names are those of `confine run --json` (spec.CommandResult in the Go
module) and `confine check --json`. Fields a newer binary adds are kept in
``extra`` rather than dropped or refused, so an older client still works.
"""

import base64
import binascii
from dataclasses import dataclass, field, fields
from typing import Any, Callable, Dict, FrozenSet, Mapping, Optional, Tuple, Type, TypeVar

# The marker the Go side puts between head and tail (spec.Stream.Text).
TRUNCATION_MARKER = "\n[... confine: output truncated ...]\n"
TRUNCATION_MARKER_BYTES = TRUNCATION_MARKER.encode()

# Exit statuses of the confine CLI itself (internal/cli).
EXIT_TIMEOUT = 124
EXIT_CONFINE = 125
EXIT_NOT_EXECUTABLE = 126
EXIT_NOT_FOUND = 127


@dataclass(frozen=True)
class Stream:
    """One captured output stream: the first and last bytes kept, as text
    (invalid UTF-8 became U+FFFD) and as the exact bytes (``head_bytes``,
    ``tail_bytes``, ``data``), and how many bytes the command wrote."""

    head: str = ""
    tail: str = ""
    total_bytes: int = 0
    truncated: bool = False
    head_bytes: bytes = b""
    tail_bytes: bytes = b""

    @property
    def text(self) -> str:
        """The kept text, with a marker where bytes were dropped."""
        if not self.truncated:
            return self.head
        return self.head + TRUNCATION_MARKER + self.tail

    @property
    def data(self) -> bytes:
        """The kept bytes, exactly as the command wrote them, with the
        marker where bytes were dropped."""
        if not self.truncated:
            return self.head_bytes
        return self.head_bytes + TRUNCATION_MARKER_BYTES + self.tail_bytes

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Usage:
    """Resource usage of the whole process tree."""

    user_cpu_ns: int = 0
    sys_cpu_ns: int = 0
    max_rss_kb: int = 0
    # The tree's peak memory, where a memory cgroup bounded the run.
    peak_memory_bytes: int = 0


@dataclass(frozen=True)
class Guarantee:
    """How one guarantee was kept for the run (or that it was waived)."""

    name: str
    mechanism: str = ""
    waived: bool = False


@dataclass(frozen=True)
class Denial:
    """An operation the sandbox refused in user space."""

    syscall: str
    errno: str = ""
    reason: str = ""
    path: str = ""
    # The grant that would allow it: a flag (--ro DIR) or a profile line.
    hint: str = ""


@dataclass(frozen=True)
class Persistence:
    """A change the run made to a path of its work tree that a program
    outside the sandbox may run later (git hooks and configuration, a
    nested repository, a shell rc or editor task file): reported, not
    prevented. ``kind`` is created, modified or removed."""

    path: str
    kind: str = ""
    what: str = ""


@dataclass(frozen=True)
class Connection:
    """One connection the egress proxy handled (network = "allowlist"):
    allowed or denied, with why and how many bytes went each way."""

    domain: str
    port: int = 0
    protocol: str = ""
    peer: str = ""
    request_bytes: int = 0
    verdict: str = ""
    reason: str = ""
    run_id: str = ""
    task_id: str = ""
    job_id: str = ""
    pid: int = 0
    address: str = ""
    bytes_in: int = 0
    bytes_out: int = 0
    approval_id: str = ""
    approval_request: str = ""
    # On a denial, the profile change that would allow it.
    hint: str = ""
    start: str = ""
    duration_ns: int = 0


@dataclass(frozen=True)
class SkippedBackend:
    """A backend that was not selected, and why."""

    name: str
    reason: str = ""


T = TypeVar("T")


_NAMES: Dict[type, FrozenSet[str]] = {}


def _names(cls: type) -> FrozenSet[str]:
    """The field names of dataclass cls (asked for every object of every
    result: kept)."""
    n = _NAMES.get(cls)
    if n is None:
        n = _NAMES[cls] = frozenset(f.name for f in fields(cls))
    return n


def _build(cls: Type[T], d: Mapping[str, Any]) -> T:
    """cls from a JSON object, ignoring keys cls does not have."""
    names = _names(cls)
    return cls(**{k: v for k, v in d.items() if k in names})


def _exact(text: str, b64: Any) -> bytes:
    """A stream part's bytes: the base64 form confine gives when they are
    not UTF-8 (json_api 4), else the text, which then holds them exactly."""
    if isinstance(b64, str) and b64:
        try:
            return base64.b64decode(b64, validate=True)
        except (binascii.Error, ValueError):
            pass
    return text.encode("utf-8", errors="surrogatepass")


def _stream(d: Mapping[str, Any]) -> Stream:
    """A Stream from its JSON object."""
    head, tail = str(d.get("head") or ""), str(d.get("tail") or "")
    return Stream(head=head, tail=tail, total_bytes=int(d.get("total_bytes") or 0),
                  truncated=bool(d.get("truncated")), head_bytes=_exact(head, d.get("head_base64")),
                  tail_bytes=_exact(tail, d.get("tail_base64")))


@dataclass(frozen=True)
class Result:
    """The outcome of one run (spec.CommandResult).

    ``exit_code`` is the command's own status, -1 when it died of a signal
    (then ``signal`` is set). ``exit_status`` is what the CLI exits with:
    124 on timeout, 128+N for signal N, else the command's status.
    """

    run_id: str
    exit_code: int
    stdout: Stream
    stderr: Stream
    # The revision of the result's JSON form (confine's json_api).
    json_api: int = 0
    duration_ns: int = 0
    timed_out: bool = False
    cancelled: bool = False
    killed: bool = False
    signal: int = 0
    survivors: int = 0
    # The kernel killed a process of the run at its memory cgroup's bound.
    oom_killed: bool = False
    # The run was stopped at its memory bound (by the kernel in its memory
    # cgroup, or by the launcher's memory watch, which ends the whole run).
    memory_limit_killed: bool = False
    # "memory-cgroup" or "memory-watch" (the whole tree), or "rlimit-data"
    # (each process).
    memory_bound: str = ""
    usage: Usage = field(default_factory=Usage)
    backend: str = ""
    skipped_backends: Tuple[SkippedBackend, ...] = ()
    layers: Tuple[str, ...] = ()
    guarantees: Tuple[Guarantee, ...] = ()
    path_omitted: Tuple[str, ...] = ()
    event_log_skipped: str = ""
    # Warm build caches the run had, NAME=DIR.
    caches: Tuple[str, ...] = ()
    hidden_credentials: Tuple[str, ...] = ()
    denials: Tuple[Denial, ...] = ()
    persistence: Tuple[Persistence, ...] = ()
    connections: Tuple[Connection, ...] = ()
    # Fields of a newer confine this client does not know, as parsed.
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def exit_status(self) -> int:
        """The CLI's exit status for this result."""
        if self.timed_out:
            return EXIT_TIMEOUT
        if self.signal:
            return 128 + self.signal
        return self.exit_code

    @property
    def ok(self) -> bool:
        """The command exited 0 within its limits."""
        return self.exit_status == 0 and not self.cancelled

    @property
    def duration(self) -> float:
        """Wall time in seconds."""
        return self.duration_ns / 1e9

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Result":
        """A Result from the object `confine run --json` prints. A field
        added to the Go struct needs only a line in this class (and an
        entry in _NESTED when it is an object or a list of objects)."""
        known = _names(cls) - {"extra"}
        kw: Dict[str, Any] = {}
        for name in known:
            if name not in d or d[name] is None:
                continue
            v = d[name]
            conv = _NESTED.get(name)
            if conv is not None:
                v = conv(v)
            elif isinstance(v, list):
                v = tuple(v)
            kw[name] = v
        kw.setdefault("stdout", Stream())
        kw.setdefault("stderr", Stream())
        return cls(run_id=kw.pop("run_id", ""), exit_code=kw.pop("exit_code"), stdout=kw.pop("stdout"),
                   stderr=kw.pop("stderr"), extra={k: v for k, v in d.items() if k not in known}, **kw)


# How the object-valued fields of a result are built.
_NESTED: Dict[str, Callable[[Any], Any]] = {
    "stdout": _stream,
    "stderr": _stream,
    "usage": lambda v: _build(Usage, v),
    "skipped_backends": lambda v: tuple(_build(SkippedBackend, x) for x in v),
    "guarantees": lambda v: tuple(_build(Guarantee, x) for x in v),
    "denials": lambda v: tuple(_build(Denial, x) for x in v),
    "persistence": lambda v: tuple(_build(Persistence, x) for x in v),
    "connections": lambda v: tuple(_build(Connection, x) for x in v),
}


@dataclass(frozen=True)
class GuaranteeStatus:
    """One guarantee on this host: its mechanism, or what it would need."""

    name: str
    mechanism: str = ""
    missing: str = ""
    waived: bool = False


@dataclass(frozen=True)
class Availability:
    """What `check()` found: whether runs can be confined here and how.

    ``ok`` is False, with ``reason``, when the binary is missing, too old,
    or this host cannot enforce every guarantee (``missing`` names them).
    """

    ok: bool
    reason: str = ""
    binary: str = ""
    version: str = ""
    json_api: int = 0
    backend: str = ""
    layers: Tuple[str, ...] = ()
    guarantees: Tuple[GuaranteeStatus, ...] = ()
    host: Optional[Dict[str, Any]] = field(default=None, compare=False)

    @property
    def missing(self) -> Tuple[str, ...]:
        """Names of the guarantees this host cannot enforce."""
        return tuple(g.name for g in self.guarantees if g.missing)
