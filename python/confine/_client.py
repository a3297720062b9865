"""Drive the confine binary: one `confine run --json` process per run.

The binary does the confinement; this module builds its command line,
parses its one JSON object, and maps its refusals to exceptions. It never
runs anything unconfined: a missing or too old binary raises
SandboxUnavailable.
"""

import asyncio
import json
import math
import os
import selectors
import shutil
import signal
import subprocess
import threading
import weakref
from typing import IO, Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _server
from ._errors import CommandFailed, ConfineError, Refused, SandboxUnavailable, Timeout
from ._result import (EXIT_CONFINE, EXIT_NOT_EXECUTABLE, EXIT_NOT_FOUND, Availability,
                      GuaranteeStatus, Result)

# The revision of confine's --json interfaces this client needs (`confine
# version --json`'s json_api): 1 added the refusal object and version --json,
# 3 run --die-with-parent, 4 json_api in results, exact bytes
# (head_base64) and run --result-fd (live output).
MIN_JSON_API = 4

# The variable that names the confine binary, before PATH.
BIN_ENV = "CONFINE_BIN"

# After SIGTERM, confine ends the tree within its kill grace (SIGTERM, then
# SIGKILL to the tree) and prints the result; this much longer is allowed
# before confine itself is SIGKILLed (the tree then dies with it: the run's
# init kills it when its launcher dies).
_CANCEL_MARGIN = 10.0
_DEFAULT_KILL_GRACE = 2.0

Env = Mapping[str, Optional[str]]
Number = Union[int, float]
PathArg = Union[str, "os.PathLike[str]"]
# on_output(stream, chunk): "stdout" or "stderr", and the bytes as the
# command wrote them, as they arrive.
OutputCallback = Callable[[str, bytes], None]


def _duration(name: str, seconds: Optional[Number]) -> Optional[str]:
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) \
            or seconds <= 0:
        raise ValueError("%s must be a positive number of seconds, not %r" % (name, seconds))
    # Go durations; nanoseconds keep the caller's precision.
    return "%dns" % max(1, round(seconds * 1e9))


def _size(name: str, n: Optional[int]) -> Optional[str]:
    if n is None:
        return None
    if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
        raise ValueError("%s must be a positive integer, not %r" % (name, n))
    return str(n)


def _check_argv(argv: Sequence[PathArg], workdir: Optional[PathArg]) -> List[str]:
    """The command line as strings, checked the same way for the CLI and
    the server path; workdir must be given."""
    if isinstance(argv, (str, bytes)) or not argv:
        raise ValueError("argv must be a non-empty sequence of strings, not %r" % (argv,))
    out = [os.fspath(a) for a in argv]
    if not all(isinstance(a, str) for a in out):
        raise ValueError("argv must hold strings: %r" % (out,))
    if workdir is None:
        raise ValueError("workdir is required: the command's cwd and only writable root")
    return out


def _paths(name: str, ps: Iterable[PathArg]) -> List[str]:
    out = []
    for p in ps:
        q = os.fspath(p)
        if not isinstance(q, str) or not q:
            raise ValueError("%s: %r is not a path" % (name, q))
        out.append(os.path.abspath(q))
    return out


def _missing(looked: str) -> str:
    """The message for a binary that is not there: where we looked and how
    to fix it."""
    return ("confine binary not found (%s); nothing was run. Build it with "
            "`CGO_ENABLED=0 go build -o confine ./cmd/confine` and set %s to its path "
            "(e.g. %s=$PWD/confine), put it on PATH, or pass confine.Client(binary=PATH)" % (
                looked, BIN_ENV, BIN_ENV))


class Client:
    """A confine binary and the concurrency limit of its async runs.

    ``binary`` is a path or a name looked up on PATH; without it, the
    binary is $CONFINE_BIN (a path, or a name looked up on PATH), else
    "confine" on PATH. The current directory is never searched: it may be
    a work directory that an untrusted run wrote.
    ``max_concurrent`` bounds how many `run_async` calls run at once (None:
    no bound); synchronous `run` calls are the caller's own threads and are
    not counted. The binary is checked (present, new enough) on first use.
    ``server`` sends the runs to a `confine serve` instead of starting the
    binary for each: a socket path, True for the default socket, False for
    none; None (the default) reads $CONFINE_SERVER. A server that does not
    answer, or runs as another uid, raises SandboxUnavailable (kind
    "no_server" or "peer"): nothing runs without it.
    """

    def __init__(self, binary: Optional[PathArg] = None, *,
                 max_concurrent: Optional[int] = None, server: Any = None):
        if max_concurrent is not None and (isinstance(max_concurrent, bool)
                                           or not isinstance(max_concurrent, int) or max_concurrent < 1):
            raise ValueError("max_concurrent must be a positive integer or None, not %r" % (max_concurrent,))
        self._binary: Optional[str] = str(os.fspath(binary)) if binary is not None else None
        # The `confine serve` socket runs go to (None: each run starts the
        # binary). A server that does not answer refuses the run.
        self.server: Optional[str] = _server.resolve_server(server)
        self.max_concurrent = max_concurrent
        self._lock = threading.Lock()
        self._version: Optional[Dict[str, Any]] = None
        self._path: Optional[str] = None
        # asyncio semaphores belong to one event loop.
        self._sems: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = \
            weakref.WeakKeyDictionary()

    # -- the binary -------------------------------------------------------

    def _resolve(self) -> Tuple[str, Dict[str, Any]]:
        """The binary's absolute path and its `version --json`, or
        SandboxUnavailable: fail closed, never run unconfined."""
        with self._lock:
            if self._path is not None and self._version is not None:
                return self._path, self._version
            b, source = self._binary, "given as binary=%r" % self._binary
            if b is None:
                b, source = os.environ.get(BIN_ENV) or "", "%s=%r" % (BIN_ENV, os.environ.get(BIN_ENV))
                if not b:
                    b, source = "confine", "%s is unset and there is no confine on PATH" % BIN_ENV
            found = b if os.sep in b else shutil.which(b)
            if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
                if os.sep not in b and not source.startswith(BIN_ENV + " is unset"):
                    source += ", looked up on PATH"
                raise SandboxUnavailable(_missing(source), kind="missing_binary")
            path = os.path.abspath(found)
            try:
                p = subprocess.run([path, "version", "--json"], stdin=subprocess.DEVNULL,
                                   capture_output=True, timeout=60)
            except (OSError, subprocess.TimeoutExpired) as e:
                raise SandboxUnavailable("confine binary %s does not run: %s" % (path, e),
                                         kind="missing_binary") from e
            try:
                v = json.loads(p.stdout)
                api = v["json_api"]
            except (ValueError, KeyError, TypeError):
                raise SandboxUnavailable(
                    "confine binary %s is too old: `confine version --json` failed (exit %d: %s); "
                    "this client needs json_api >= %d" % (path, p.returncode, p.stderr.decode(errors="replace").strip(),
                                                          MIN_JSON_API), kind="too_old") from None
            if not isinstance(api, int) or api < MIN_JSON_API:
                raise SandboxUnavailable("confine binary %s is too old: json_api %r, this client needs >= %d" % (
                    path, api, MIN_JSON_API), kind="too_old")
            self._path, self._version = path, v
            return path, v

    @property
    def binary(self) -> str:
        """The resolved path of the confine binary (SandboxUnavailable when
        there is none, or it is too old)."""
        return self._resolve()[0]

    @property
    def version(self) -> str:
        """The confine binary's version string."""
        return str(self._resolve()[1].get("version", ""))

    # -- check ------------------------------------------------------------

    def check(self) -> Availability:
        """What this host enforces (`confine check --json`). Never raises
        for an unusable host or binary: ``ok`` is False and ``reason`` says
        why."""
        try:
            path, v = self._resolve()
        except SandboxUnavailable as e:
            return Availability(ok=False, reason=e.message, binary=self._binary or "")
        p = subprocess.run([path, "check", "--json"], stdin=subprocess.DEVNULL, capture_output=True)
        try:
            d = json.loads(p.stdout)
        except ValueError:
            return Availability(ok=False, binary=path, version=str(v.get("version", "")), json_api=int(v["json_api"]),
                                reason="confine check failed (exit %d): %s" % (
                                    p.returncode, p.stderr.decode(errors="replace").strip()))
        gs = tuple(GuaranteeStatus(name=g.get("name", ""), mechanism=g.get("mechanism", ""),
                                   missing=g.get("missing", ""), waived=g.get("waived", False))
                   for g in d.get("guarantees") or ())
        ok = bool(d.get("ok")) and p.returncode == 0
        reason = ""
        if not ok:
            missing = ["%s needs %s" % (g.name, g.missing) for g in gs if g.missing]
            reason = "; ".join(missing) or p.stderr.decode(errors="replace").strip() or "confine check failed"
        return Availability(ok=ok, reason=reason, binary=path, version=str(v.get("version", "")),
                            json_api=int(v["json_api"]), backend=str(d.get("backend", "")),
                            layers=tuple(d.get("layers") or ()), guarantees=gs, host=d.get("host"))

    # -- run --------------------------------------------------------------

    def _argv(self, argv: Sequence[PathArg], *, workdir: PathArg, profile: str, env: Optional[Env],
              timeout: Optional[Number], cpu_time: Optional[Number], memory: Optional[int],
              max_procs: Optional[int], max_file_size: Optional[int], max_open_files: Optional[int],
              output_limit: Optional[int], kill_grace: Optional[Number], ro: Iterable[PathArg],
              rw: Iterable[PathArg], backend: str, event_log: Optional[str], cap: Optional[str],
              result_fd: Optional[int] = None) -> List[str]:
        args = _check_argv(argv, workdir)
        path, _ = self._resolve()
        # --die-with-parent: a caller killed outright (SIGKILL, the OOM
        # killer) cannot end its run, so confine ends it when this process
        # exits.
        cmd = [path, "run", "--json", "--die-with-parent", "--workdir", os.path.abspath(os.fspath(workdir)),
               "--profile", profile]
        if backend:
            cmd += ["--backend", backend]
        for flag, val in (("--timeout", _duration("timeout", timeout)),
                          ("--cpu-time", _duration("cpu_time", cpu_time)),
                          ("--kill-grace", _duration("kill_grace", kill_grace)),
                          ("--memory", _size("memory", memory)),
                          ("--max-procs", _size("max_procs", max_procs)),
                          ("--max-file-size", _size("max_file_size", max_file_size)),
                          ("--max-open-files", _size("max_open_files", max_open_files)),
                          ("--output-limit", _size("output_limit", output_limit))):
            if val is not None:
                cmd += [flag, val]
        for p in _paths("ro", ro):
            cmd += ["--ro", p]
        for p in _paths("rw", rw):
            cmd += ["--rw", p]
        for name, val in (env or {}).items():
            if not isinstance(name, str) or not name or "=" in name:
                raise ValueError("env: bad variable name %r" % (name,))
            # NAME alone passes the value from confine's environment (this
            # process's); the sanitiser judges either form.
            cmd += ["--env", name if val is None else "%s=%s" % (name, val)]
        if event_log is not None:
            cmd += ["--event-log", event_log]
        if cap is not None:
            cmd += ["--cap", cap]
        if result_fd is not None:
            # Output streams live to our pipes; the result object comes
            # on this descriptor.
            cmd += ["--result-fd", str(result_fd)]
        return cmd + ["--"] + args

    def _server_request(self, argv: Sequence[PathArg], *, workdir: PathArg, profile: str, env: Optional[Env],
                        timeout: Optional[Number], cpu_time: Optional[Number], memory: Optional[int],
                        max_procs: Optional[int], max_file_size: Optional[int], max_open_files: Optional[int],
                        output_limit: Optional[int], kill_grace: Optional[Number], ro: Iterable[PathArg],
                        rw: Iterable[PathArg], backend: str, input: Optional[bytes], event_log: Optional[str],
                        cap: Optional[str]) -> Dict[str, Any]:
        args = _check_argv(argv, workdir)
        limits: Dict[str, int] = {}
        for key, name, val in (("wall_time", "timeout", timeout), ("cpu_time", "cpu_time", cpu_time),
                               ("kill_grace", "kill_grace", kill_grace)):
            ds = _duration(name, val)
            if ds is not None:
                limits[key] = int(ds[:-2])
        for key, name, n in (("memory_bytes", "memory", memory), ("max_procs", "max_procs", max_procs),
                             ("file_size_bytes", "max_file_size", max_file_size),
                             ("open_files", "max_open_files", max_open_files),
                             ("output_bytes", "output_limit", output_limit)):
            if n is not None and _size(name, n) is not None:
                limits[key] = n
        flags = []
        for name, ev in (env or {}).items():
            if not isinstance(name, str) or not name or "=" in name:
                raise ValueError("env: bad variable name %r" % (name,))
            flags.append(name if ev is None else "%s=%s" % (name, ev))
        return _server.build_request(args, workdir=os.path.abspath(os.fspath(workdir)), profile=profile,
                                     env_flags=flags, limits=limits, ro=_paths("ro", ro), rw=_paths("rw", rw),
                                     backend=backend, input=input, event_log=event_log, cap=cap)

    def _server_result(self, d: Dict[str, Any], raise_on_timeout: bool, timeout: Optional[Number]) -> Result:
        """A Result (or the exception) from the server's answer, as _result
        makes them from `confine run --json`'s output."""
        if isinstance(d.get("error"), dict) and d["error"].get("kind") != "cancelled":
            return self._decoded(EXIT_CONFINE, {"error": d["error"]}, "", raise_on_timeout, timeout)
        return self._decoded(0, d.get("result"), "", raise_on_timeout, timeout)

    def _run_server(self, req: Dict[str, Any], raise_on_timeout: bool, timeout: Optional[Number]) -> Result:
        server = self.server
        assert server is not None
        s = _server.connect(server)
        try:
            try:
                _server.send(s, req)
            except OSError as e:
                # A server that refused at once may have answered and
                # closed before the request was in.
                try:
                    d = _server.receive(s, server)
                except (OSError, ConfineError):
                    raise SandboxUnavailable("confine server at %s: sending the request: %s" % (self.server, e),
                                             kind="no_server") from None
                return self._server_result(d, raise_on_timeout, timeout)
            try:
                d = _server.receive(s, server)
            except BaseException:
                # KeyboardInterrupt and the like: hanging up ends the
                # run's tree on the server, which answers once it is gone.
                _server.cancel(s)
                s.settimeout(_request_grace(req))
                try:
                    _server.receive(s, server)
                except (OSError, ConfineError):
                    pass
                raise
        finally:
            s.close()
        return self._server_result(d, raise_on_timeout, timeout)

    def _result(self, code: int, out: bytes, err: bytes, raise_on_timeout: bool,
                timeout: Optional[Number]) -> Result:
        try:
            d = json.loads(out) if out.strip() else None
        except ValueError:
            d = None
        return self._decoded(code, d, err.decode(errors="replace").strip(), raise_on_timeout, timeout)

    def _decoded(self, code: int, d: Any, msg: str, raise_on_timeout: bool, timeout: Optional[Number]) -> Result:
        """A Result (or the exception) from confine's exit status, its JSON
        object d (None when it printed none) and its stderr msg."""
        if isinstance(d, dict) and isinstance(d.get("error"), dict):
            e = d["error"]
            kind, message = e.get("kind", ""), e.get("message", "") or msg
            status = e.get("exit_status", code)
            if kind == "unavailable":
                raise SandboxUnavailable(message, guarantees=e.get("guarantees") or (), exit_status=status)
            raise Refused(message, kind=kind, exit_status=status)
        if not isinstance(d, dict) or "exit_code" not in d:
            # A refusal before any JSON: a bad flag value, reported by the
            # flag parser (exit 125), or confine killed from outside.
            if code in (EXIT_CONFINE, EXIT_NOT_FOUND, EXIT_NOT_EXECUTABLE):
                raise Refused(msg or "confine exited %d" % code, kind="usage", exit_status=code)
            raise ConfineError("confine exited %d without a result: %s" % (code, msg or "(no message)"),
                               kind="launch", exit_status=code)
        res = Result.from_json(d)
        if res.timed_out and raise_on_timeout:
            raise Timeout(res, float(timeout) if timeout is not None else None)
        return res

    def _opts(self, argv: Sequence[PathArg], workdir: PathArg, kw: Dict[str, Any]) -> List[str]:
        """confine's command line for a direct run."""
        return self._argv(argv, workdir=workdir, **kw)

    def run(self, argv: Sequence[PathArg], *, workdir: PathArg, profile: str = "default",
            env: Optional[Env] = None, timeout: Optional[Number] = None, cpu_time: Optional[Number] = None,
            memory: Optional[int] = None, max_procs: Optional[int] = None, max_file_size: Optional[int] = None,
            max_open_files: Optional[int] = None, output_limit: Optional[int] = None,
            kill_grace: Optional[Number] = None, ro: Iterable[PathArg] = (), rw: Iterable[PathArg] = (),
            backend: str = "", input: Optional[bytes] = None, event_log: Optional[str] = None,
            cap: Optional[str] = None, raise_on_timeout: bool = False,
            on_output: Optional[OutputCallback] = None, check: bool = False) -> Result:
        """Run argv confined and return its Result (see the module-level
        `run` for the parameters)."""
        kw: Dict[str, Any] = dict(profile=profile, env=env, timeout=timeout, cpu_time=cpu_time, memory=memory,
                                  max_procs=max_procs, max_file_size=max_file_size, max_open_files=max_open_files,
                                  output_limit=output_limit, kill_grace=kill_grace, ro=ro, rw=rw, backend=backend,
                                  event_log=event_log, cap=cap)
        if self.server is not None:
            if on_output is not None:
                raise ValueError("on_output needs a direct run: a confine server run has no live output here")
            req = self._server_request(argv, workdir=workdir, input=input, **kw)
            return _checked(self._run_server(req, raise_on_timeout, timeout), check)
        if on_output is not None:
            return _checked(self._run_live(argv, workdir, kw, input, on_output, raise_on_timeout, timeout), check)
        cmd = self._opts(argv, workdir, kw)
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            out, err = p.communicate(input)
        except BaseException:
            # KeyboardInterrupt and the like: confine ends the tree on
            # SIGTERM; a confine that does not exit in time is killed, and
            # its run's init then kills the tree.
            _stop(p, kill_grace)
            raise
        return _checked(self._result(p.returncode, out, err, raise_on_timeout, timeout), check)

    def _run_live(self, argv: Sequence[PathArg], workdir: PathArg, kw: Dict[str, Any], input: Optional[bytes],
                  on_output: OutputCallback, raise_on_timeout: bool, timeout: Optional[Number]) -> Result:
        """A direct run whose output goes to on_output as it arrives; the
        result object comes on a descriptor of its own (--result-fd)."""
        r, w = os.pipe()
        try:
            cmd = self._opts(argv, workdir, dict(kw, result_fd=w))
            p = subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(w,))
        except BaseException:
            os.close(r)
            os.close(w)
            raise
        os.close(w)
        err = bytearray()

        def relay(name: str, chunk: bytes) -> None:
            if name == "stderr":
                # confine's own refusal message, when there is no result.
                err.extend(chunk[-4096:])
                del err[:-4096]
            on_output(name, chunk)
        try:
            res = _relay(p, r, input, relay)
        except BaseException:
            _stop(p, kw.get("kill_grace"))
            raise
        finally:
            os.close(r)
        return self._result(p.returncode, res, bytes(err), raise_on_timeout, timeout)

    async def _run_server_async(self, req: Dict[str, Any], raise_on_timeout: bool,
                                timeout: Optional[Number]) -> Result:
        d = await _server_exchange(self, req)
        return self._server_result(d, raise_on_timeout, timeout)

    def _semaphore(self) -> Optional[asyncio.Semaphore]:
        if self.max_concurrent is None:
            return None
        loop = asyncio.get_running_loop()
        with self._lock:
            s = self._sems.get(loop)
            if s is None:
                s = self._sems[loop] = asyncio.Semaphore(self.max_concurrent)
            return s

    async def run_async(self, argv: Sequence[PathArg], *, workdir: PathArg, profile: str = "default",
                        env: Optional[Env] = None, timeout: Optional[Number] = None,
                        cpu_time: Optional[Number] = None, memory: Optional[int] = None,
                        max_procs: Optional[int] = None, max_file_size: Optional[int] = None,
                        max_open_files: Optional[int] = None, output_limit: Optional[int] = None,
                        kill_grace: Optional[Number] = None, ro: Iterable[PathArg] = (),
                        rw: Iterable[PathArg] = (), backend: str = "", input: Optional[bytes] = None,
                        event_log: Optional[str] = None, cap: Optional[str] = None,
                        raise_on_timeout: bool = False, on_output: Optional[OutputCallback] = None,
                        check: bool = False) -> Result:
        """As `run`, in asyncio, at most max_concurrent at a time.
        Cancelling the task ends the run's whole process tree before the
        CancelledError propagates. on_output is called in the event loop."""
        kw: Dict[str, Any] = dict(profile=profile, env=env, timeout=timeout, cpu_time=cpu_time, memory=memory,
                                  max_procs=max_procs, max_file_size=max_file_size, max_open_files=max_open_files,
                                  output_limit=output_limit, kill_grace=kill_grace, ro=ro, rw=rw, backend=backend,
                                  event_log=event_log, cap=cap)
        if self.server is not None and on_output is not None:
            raise ValueError("on_output needs a direct run: a confine server run has no live output here")
        sem = self._semaphore()
        if sem is not None:
            await sem.acquire()
        try:
            if self.server is not None:
                req = self._server_request(argv, workdir=workdir, input=input, **kw)
                return _checked(await self._run_server_async(req, raise_on_timeout, timeout), check)
            # The version check runs a process: off the event loop.
            if self._path is None:
                await asyncio.get_running_loop().run_in_executor(None, self._resolve)
            r: Optional[int] = None
            w: Optional[int] = None
            if on_output is not None:
                r, w = os.pipe()
            try:
                cmd = self._opts(argv, workdir, dict(kw, result_fd=w))
                p = await asyncio.create_subprocess_exec(
                    *cmd, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=() if w is None else (w,))
            except BaseException:
                for fd in (r, w):
                    if fd is not None:
                        os.close(fd)
                raise
            if w is not None:
                os.close(w)
            try:
                if r is None or on_output is None:
                    out, err = await p.communicate(input)
                else:
                    out, err = await _relay_async(p, r, input, on_output)
            except BaseException:
                await asyncio.shield(_stop_async(p, kill_grace))
                raise
            finally:
                if r is not None:
                    os.close(r)
            assert p.returncode is not None
            return _checked(self._result(p.returncode, out, err, raise_on_timeout, timeout), check)
        finally:
            if sem is not None:
                sem.release()


def _checked(res: Result, check: bool) -> Result:
    """res, or CommandFailed when check is set and it did not exit 0."""
    if check and res.exit_status != 0:
        raise CommandFailed(res)
    return res


def _feed(f: IO[bytes], data: bytes) -> None:
    """Write the command's stdin, then close it (a command that stops
    reading early is not an error)."""
    try:
        f.write(data)
    except (BrokenPipeError, OSError):
        pass
    finally:
        try:
            f.close()
        except OSError:
            pass


def _relay(p: "subprocess.Popen[bytes]", rfd: int, input: Optional[bytes],
           on_output: OutputCallback) -> bytes:
    """Pass p's output to on_output as it arrives and return what came on
    rfd (the result object), once p has exited."""
    assert p.stdout is not None and p.stderr is not None
    if input is not None:
        assert p.stdin is not None
        threading.Thread(target=_feed, args=(p.stdin, input), daemon=True).start()
    result = bytearray()
    with selectors.DefaultSelector() as sel:
        sel.register(p.stdout.fileno(), selectors.EVENT_READ, "stdout")
        sel.register(p.stderr.fileno(), selectors.EVENT_READ, "stderr")
        sel.register(rfd, selectors.EVENT_READ, "result")
        while sel.get_map():
            for key, _ in sel.select():
                chunk = os.read(key.fd, 1 << 16)
                if not chunk:
                    sel.unregister(key.fd)
                elif key.data == "result":
                    result += chunk
                else:
                    on_output(key.data, chunk)
    p.wait()
    return bytes(result)


def _read_all(fd: int) -> bytes:
    out = bytearray()
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            return bytes(out)
        out += b


async def _relay_async(p: "asyncio.subprocess.Process", rfd: int, input: Optional[bytes],
                       on_output: OutputCallback) -> Tuple[bytes, bytes]:
    """_relay in asyncio: (the result object, the end of stderr)."""
    assert p.stdout is not None and p.stderr is not None
    err = bytearray()

    async def pump(name: str, s: "asyncio.StreamReader") -> None:
        while True:
            chunk = await s.read(1 << 16)
            if not chunk:
                return
            if name == "stderr":
                err.extend(chunk[-4096:])
                del err[:-4096]
            on_output(name, chunk)

    async def feed() -> None:
        if input is None or p.stdin is None:
            return
        try:
            p.stdin.write(input)
            await p.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            p.stdin.close()
    loop = asyncio.get_running_loop()
    res, _, _, _ = await asyncio.gather(loop.run_in_executor(None, _read_all, rfd),
                                        pump("stdout", p.stdout), pump("stderr", p.stderr), feed())
    await p.wait()
    return res, bytes(err)


async def _server_exchange(c: "Client", req: Dict[str, Any]) -> Dict[str, Any]:
    loop = asyncio.get_running_loop()
    s = await loop.run_in_executor(None, _server.connect, c.server)
    try:
        s.setblocking(False)
        body = json.dumps(req).encode()
        await loop.sock_sendall(s, len(body).to_bytes(4, "big") + body)
        chunks = []
        try:
            while True:
                b = await loop.sock_recv(s, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        except asyncio.CancelledError:
            # Hang up: the server ends the tree and answers once it is
            # gone, which the caller waits for, as for a direct run.
            _server.cancel(s)

            async def drain() -> None:
                while await loop.sock_recv(s, 1 << 16):
                    pass
            try:
                await asyncio.wait_for(asyncio.shield(drain()), _request_grace(req))
            except (asyncio.TimeoutError, asyncio.CancelledError, OSError):
                pass
            raise
    finally:
        s.close()
    data = b"".join(chunks)
    try:
        d = json.loads(data)
    except ValueError:
        raise SandboxUnavailable("the confine server at %s closed the connection without an answer" % c.server,
                                 kind="no_server") from None
    if not isinstance(d, dict):
        raise SandboxUnavailable("the confine server at %s answered %r, not an object" % (c.server, d),
                                 kind="no_server")
    return d


def _request_grace(req: Dict[str, Any]) -> float:
    ns = req["spec"]["Limits"].get("kill_grace")
    return _grace(ns / 1e9 if ns else None)


def _grace(kill_grace: Optional[Number]) -> float:
    return (float(kill_grace) if kill_grace is not None else _DEFAULT_KILL_GRACE) + _CANCEL_MARGIN


def _stop(p: "subprocess.Popen[bytes]", kill_grace: Optional[Number]) -> None:
    if p.poll() is not None:
        return
    try:
        p.send_signal(signal.SIGTERM)
        # Read on: confine prints its result before it exits, and a full
        # pipe would hold it.
        p.communicate(timeout=_grace(kill_grace))
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
    except ProcessLookupError:
        pass


async def _stop_async(p: "asyncio.subprocess.Process", kill_grace: Optional[Number]) -> None:
    if p.returncode is not None:
        return
    try:
        p.send_signal(signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        # Read on: confine prints its result before it exits, and a full
        # pipe would hold it.
        await asyncio.wait_for(p.communicate(), _grace(kill_grace))
    except asyncio.TimeoutError:
        try:
            p.kill()
        except ProcessLookupError:
            pass
        await p.wait()
