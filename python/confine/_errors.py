"""Exceptions. Each carries the CLI's exit status and, where there is one,
the refusal's kind from `confine run --json` ({"error": {"kind": ...}})."""

from typing import Optional, Sequence, Tuple

from ._result import EXIT_CONFINE, EXIT_TIMEOUT, Result


class ConfineError(Exception):
    """Base class of every error the client raises about a run."""

    def __init__(self, message: str, *, kind: str = "", exit_status: int = EXIT_CONFINE):
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.exit_status = exit_status


class SandboxUnavailable(ConfineError):
    """The run cannot be confined here, so nothing ran: the confine binary
    is missing or too old, or the host cannot enforce a guarantee.
    ``guarantees`` names the guarantees that are missing, when known."""

    def __init__(self, message: str, *, guarantees: Sequence[str] = (), kind: str = "unavailable",
                 exit_status: int = EXIT_CONFINE):
        super().__init__(message, kind=kind, exit_status=exit_status)
        self.guarantees: Tuple[str, ...] = tuple(guarantees)


class Refused(ConfineError):
    """confine refused the request before the command ran: bad input
    (``kind`` "invalid_spec" or "usage"), a refused capability, a program
    that is not found (exit_status 127) or not executable (126), or a
    launch failure."""


class CommandFailed(ConfineError):
    """The command ran and exited non-zero (or died of a signal, or timed
    out); raised only when asked (check=True). ``result`` is the run's
    result and ``exit_status`` the CLI's status for it."""

    def __init__(self, result: Result):
        super().__init__("command exited with status %d (run %s)" % (result.exit_status, result.run_id),
                         kind="failed", exit_status=result.exit_status)
        self.result = result


class Timeout(ConfineError):
    """The run hit its wall-clock limit; raised only when asked
    (raise_on_timeout=True). ``result`` is the run's result: the tree was
    killed."""

    def __init__(self, result: Result, limit: Optional[float] = None):
        what = "run %s timed out" % result.run_id
        if limit is not None:
            what += " after %gs" % limit
        super().__init__(what + "; the command's process tree was ended", kind="timeout",
                         exit_status=EXIT_TIMEOUT)
        self.result = result
