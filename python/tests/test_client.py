"""The Python client against the real confine binary: real runs, limits,
cancellation, refusals. Nothing here is mocked except the binaries that
stand for a missing or too old confine."""

import asyncio
import json
import os
import signal
import stat
import time
import uuid

from pathlib import Path
from typing import Any, Dict, List

import pytest

import confine

from conftest import cancel_when_up, pids_with_mark


def write_exe(path: Path, text: str) -> str:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def test_echo(client: confine.Client, workdir: Path) -> None:
    r = client.run(["echo", "hi"], workdir=workdir)
    assert r.stdout.head == "hi\n" and str(r.stdout) == "hi\n"
    assert r.exit_code == 0 and r.exit_status == 0 and r.ok
    assert not r.timed_out and not r.cancelled and not r.stdout.truncated
    assert r.backend in ("landlock+namespaces", "landlock+seccomp")
    names = {g.name for g in r.guarantees}
    assert {"no-network", "fs-write-confined", "tree-kill"} <= names
    assert all(g.mechanism for g in r.guarantees)
    assert r.run_id and r.duration_ns > 0


def test_module_level_default_client(confine_bin: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The default client finds `confine` on PATH.
    monkeypatch.setenv("PATH", os.path.dirname(confine_bin) + os.pathsep + os.environ.get("PATH", ""))
    monkeypatch.setattr(confine, "_default", None)
    r = confine.run(["sh", "-c", "echo out; echo err >&2; exit 3"], workdir=workdir)
    assert (r.stdout.text, r.stderr.text, r.exit_code, r.exit_status) == ("out\n", "err\n", 3, 3)
    assert not r.ok
    assert confine.default_client().binary == confine_bin


def test_confinement_holds(client: confine.Client, workdir: Path, tmp_path: Path) -> None:
    # A file outside the work directory cannot be written; one inside can.
    outside = tmp_path / "outside.txt"
    r = client.run(["sh", "-c", 'echo x > "$1"; echo $?; echo y > inside.txt', "sh", str(outside)], workdir=workdir)
    assert r.exit_code == 0, r
    assert not outside.exists()
    assert (workdir / "inside.txt").read_text() == "y\n"
    # Control: unconfined, the same write succeeds.
    with open(outside, "w") as f:
        f.write("x")


def test_env_and_input(client: confine.Client, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYCLIENT_PASSED", "from-caller")
    r = client.run(["sh", "-c", 'echo "$PYCLIENT_SET $PYCLIENT_PASSED"; cat'], workdir=workdir,
                   env={"PYCLIENT_SET": "set", "PYCLIENT_PASSED": None}, input=b"stdin-bytes")
    assert r.stdout.text == "set from-caller\nstdin-bytes"


def test_timeout(client: confine.Client, workdir: Path) -> None:
    r = client.run(["sleep", "30"], workdir=workdir, timeout=0.5, kill_grace=0.2)
    assert r.timed_out and r.killed
    assert r.exit_status == confine.EXIT_TIMEOUT == 124
    with pytest.raises(confine.Timeout) as ei:
        client.run(["sleep", "30"], workdir=workdir, timeout=0.5, kill_grace=0.2, raise_on_timeout=True)
    assert ei.value.result.timed_out and ei.value.exit_status == 124


# "" lets confine choose (namespaces where they work); "core" is what a
# stock container gets: no PID namespace, the subreaper alone.
BACKENDS = ["", "core"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_timeout_kills_tree(client: confine.Client, workdir: Path, backend: str) -> None:
    mark = "pyclient-" + uuid.uuid4().hex
    r = client.run(["sh", "-c", "(setsid sh -c 'sleep 300' &); sleep 300"], workdir=workdir, backend=backend,
                   env={"PYCLIENT_MARK": mark}, timeout=1, kill_grace=0.2)
    assert r.timed_out
    assert pids_with_mark(mark) == []


def test_bounded_output(client: confine.Client, workdir: Path) -> None:
    limit = 64 << 10
    r = client.run(["sh", "-c", "echo HEAD; head -c 5000000 /dev/zero | tr '\\0' a; echo; echo TAIL"],
                   workdir=workdir, output_limit=limit)
    s = r.stdout
    assert s.truncated and s.total_bytes == 5 + 5000000 + 1 + 5
    assert len(s.head.encode()) + len(s.tail.encode()) <= limit
    assert s.head.startswith("HEAD\n") and s.tail.endswith("TAIL\n")
    assert confine._result.TRUNCATION_MARKER in s.text


def test_not_found_and_not_executable(client: confine.Client, workdir: Path) -> None:
    with pytest.raises(confine.Refused) as ei:
        client.run(["/nonexistent/program"], workdir=workdir)
    assert ei.value.kind == "not_found" and ei.value.exit_status == confine.EXIT_NOT_FOUND
    noexec = workdir / "noexec.sh"
    noexec.write_text("#!/bin/sh\necho hi\n")
    with pytest.raises(confine.Refused) as ei:
        client.run([str(noexec)], workdir=workdir)
    assert ei.value.kind == "not_executable" and ei.value.exit_status == confine.EXIT_NOT_EXECUTABLE


@pytest.mark.parametrize("kwargs,kind", [
    ({"env": {"AWS_SECRET_ACCESS_KEY": "x"}}, "invalid_spec"),
    ({"profile": "no-such-profile"}, "invalid_spec"),
    ({"workdir": "/nonexistent/dir"}, "usage"),
    ({"ro": ["/nonexistent/root"]}, "usage"),
])
def test_refusals(client: confine.Client, workdir: Path, kwargs: Dict[str, Any], kind: str) -> None:
    args: Dict[str, Any] = {"workdir": workdir}
    args.update(kwargs)
    with pytest.raises(confine.Refused) as ei:
        client.run(["true"], **args)
    assert ei.value.kind == kind and ei.value.exit_status == confine.EXIT_CONFINE
    assert ei.value.message


def test_unavailable_names_why(client: confine.Client, workdir: Path, tmp_path: Path) -> None:
    prof = tmp_path / "hostile.toml"
    prof.write_text('name = "hostile"\ntier = 3\n')
    with pytest.raises(confine.SandboxUnavailable) as ei:
        client.run(["true"], workdir=workdir, profile=str(prof))
    assert "microVM" in ei.value.message and ei.value.kind == "unavailable"


@pytest.mark.parametrize("kwargs", [
    {"timeout": -1}, {"timeout": 0}, {"timeout": float("nan")}, {"memory": 0}, {"memory": 1.5},
    {"max_procs": True}, {"env": {"A=B": "x"}}, {"workdir": None},
])
def test_bad_arguments(client: confine.Client, workdir: Path, kwargs: Dict[str, Any]) -> None:
    args: Dict[str, Any] = {"workdir": workdir}
    args.update(kwargs)
    with pytest.raises(ValueError):
        client.run(["true"], **args)


def test_bad_argv(client: confine.Client, workdir: Path) -> None:
    bad: List[Any] = [[], "echo hi", [b"echo"]]
    for argv in bad:
        with pytest.raises(ValueError):
            client.run(argv, workdir=workdir)


def test_missing_binary_fails_closed(workdir: Path, tmp_path: Path) -> None:
    c = confine.Client(str(tmp_path / "no-such-confine"))
    with pytest.raises(confine.SandboxUnavailable) as ei:
        c.run(["true"], workdir=workdir)
    assert "not found" in ei.value.message
    a = c.check()
    assert not a.ok and "not found" in a.reason
    with pytest.raises(confine.SandboxUnavailable):
        confine.Client("no-such-confine-on-path").binary


def test_too_old_binary_fails_closed(workdir: Path, tmp_path: Path) -> None:
    # What an older confine does: `version --json` is an unknown flag.
    old = write_exe(tmp_path / "confine-old", "#!/bin/sh\necho 'confine: unknown flag: --json' >&2; exit 125\n")
    # A binary that reports an older interface revision.
    older = write_exe(tmp_path / "confine-api0", "#!/bin/sh\necho '{\"version\": \"v0\", \"json_api\": 0}'\n")
    ran = tmp_path / "ran"
    for b in (old, older):
        c = confine.Client(b)
        with pytest.raises(confine.SandboxUnavailable) as ei:
            c.run(["touch", str(ran)], workdir=workdir)
        assert ei.value.kind == "too_old" and "too old" in ei.value.message
        assert not c.check().ok
    assert not ran.exists()


def test_check(client: confine.Client) -> None:
    a = client.check()
    assert a.binary == client.binary and a.json_api >= confine.MIN_JSON_API
    assert a.guarantees and {g.name for g in a.guarantees} >= {"no-network", "tree-kill"}
    if a.ok:
        assert a.backend and not a.missing and a.reason == ""
    else:
        assert a.reason and (a.missing or not a.backend)


def test_result_keeps_unknown_fields() -> None:
    d = {"run_id": "x", "exit_code": 0, "stdout": {"head": "a", "total_bytes": 1, "truncated": False},
         "stderr": {"head": "", "total_bytes": 0, "truncated": False}, "future_field": {"n": 1},
         "usage": {"user_cpu_ns": 1, "sys_cpu_ns": 2, "max_rss_kb": 3, "future": 4}}
    r = confine.Result.from_json(d)
    assert r.extra == {"future_field": {"n": 1}} and r.usage.max_rss_kb == 3


def test_result_fields_match_cli(client: confine.Client, workdir: Path) -> None:
    """Every field `confine run --json` prints is a Result field or lands in
    extra; the fields this client knows are the CLI's names."""
    r = client.run(["true"], workdir=workdir)
    assert r.extra == {}, "fields this client does not know yet: %s" % sorted(r.extra)


# -- asyncio ---------------------------------------------------------------

def test_run_async(client: confine.Client, workdir: Path) -> None:
    async def main() -> List[str]:
        rs = await asyncio.gather(*(client.run_async(["sh", "-c", "echo %d" % i], workdir=workdir)
                                    for i in range(4)))
        return [r.stdout.text for r in rs]
    assert asyncio.run(main()) == ["0\n", "1\n", "2\n", "3\n"]


def test_async_concurrency_limit(confine_bin: str, workdir: Path) -> None:
    """With max_concurrent=2, a third run starts only when one of the two
    has finished. The runs block until a file appears, so this holds
    however slow the machine is."""
    c = confine.Client(confine_bin, max_concurrent=2)
    started, release = workdir / "started", workdir / "release"
    script = 'echo "$1" >> started; while [ ! -e release ]; do sleep 0.02; done'

    def lines() -> List[str]:
        return started.read_text().split() if started.exists() else []

    async def main() -> List[confine.Result]:
        tasks = [asyncio.create_task(c.run_async(["sh", "-c", script, "sh", str(i)], workdir=workdir))
                 for i in range(3)]
        while len(lines()) < 2:
            await asyncio.sleep(0.02)
        # Two are running and blocked; the third must not start while they
        # are. (A broken limit shows up as a third line; a working one can
        # never produce it, so the wait cannot make this flaky.)
        for _ in range(25):
            await asyncio.sleep(0.02)
            assert len(lines()) == 2, lines()
        release.write_text("")
        rs = await asyncio.gather(*tasks)
        return rs
    rs = asyncio.run(main())
    assert all(r.exit_code == 0 for r in rs)
    assert sorted(lines()) == ["0", "1", "2"]
    # A new event loop gets its own semaphore.
    assert asyncio.run(c.run_async(["true"], workdir=workdir)).ok


@pytest.mark.parametrize("backend", BACKENDS)
def test_cancel_kills_tree(client: confine.Client, workdir: Path, backend: str) -> None:
    """Cancelling the asyncio task ends the whole tree: a child, and a
    grandchild that called setsid() and double-forked, all gone when the
    CancelledError reaches the caller."""
    mark = "pyclient-" + uuid.uuid4().hex
    script = ("echo $$ > pid.main; "
              "(setsid sh -c 'echo $$ > pid.daemon; sleep 300' &); "
              "sleep 300 & echo $! > pid.child; wait")

    # The pid files say the tree is up.
    alive = cancel_when_up(client, script, workdir, mark, ("pid.main", "pid.daemon", "pid.child"), backend=backend)
    # The control: the tree was really there (sh, sleep, setsid'd sh, sleep...).
    assert len(alive) >= 4, alive
    assert pids_with_mark(mark) == [], "survivors of a cancelled run"


def test_sync_interrupt_kills_tree(confine_bin: str, workdir: Path, tmp_path: Path) -> None:
    """A KeyboardInterrupt in the caller of run() ends the tree too: run
    the client in a child Python and SIGINT it alone (not its group)."""
    import subprocess
    import sys
    mark = "pyclient-" + uuid.uuid4().hex
    # The child takes SIGINT as a KeyboardInterrupt even when it inherits
    # SIGINT ignored (as every job a non-interactive shell starts with &
    # does, a CI runner's for one): Python installs its handler only for a
    # SIGINT that was not ignored at start.
    code = ("import signal, sys, confine\n"
            "signal.signal(signal.SIGINT, signal.default_int_handler)\n"
            "c = confine.Client(sys.argv[1])\n"
            "try:\n"
            "    c.run(['sh', '-c', 'echo up > up; sleep 300'], workdir=sys.argv[2], env={'PYCLIENT_MARK': sys.argv[3]})\n"
            "except KeyboardInterrupt:\n"
            "    print('interrupted')\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(confine.__file__)))
    p = subprocess.Popen([sys.executable, "-c", code, confine_bin, str(workdir), mark], env=env,
                         stdout=subprocess.PIPE, start_new_session=True)
    try:
        while not (workdir / "up").exists():
            assert p.poll() is None
            time.sleep(0.02)
        assert pids_with_mark(mark), "the control: the run's sleep is alive before the interrupt"
        os.kill(p.pid, signal.SIGINT)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert out.decode().strip() == "interrupted"
    assert pids_with_mark(mark) == []


def test_caller_killed_ends_run(confine_bin: str, workdir: Path) -> None:
    """A caller killed outright (SIGKILL: no handler, no finally) cannot
    end its run; the client passes --die-with-parent, so confine does.
    The Go side's control (internal/cli TestDieWithParent) shows a run
    without the flag outliving its caller."""
    import subprocess
    import sys
    mark = "pyclient-" + uuid.uuid4().hex
    code = ("import sys, confine\n"
            "c = confine.Client(sys.argv[1])\n"
            "c.run(['sh', '-c', 'echo up > up; sleep 300'], workdir=sys.argv[2], env={'PYCLIENT_MARK': sys.argv[3]})\n")
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(confine.__file__)))
    p = subprocess.Popen([sys.executable, "-c", code, confine_bin, str(workdir), mark], env=env,
                         start_new_session=True)
    try:
        while not (workdir / "up").exists():
            assert p.poll() is None
            time.sleep(0.02)
        assert pids_with_mark(mark), "the run's sleep is alive before the kill"
        p.kill()
        p.wait(timeout=60)
        deadline = time.monotonic() + 30
        while pids_with_mark(mark) and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
    assert pids_with_mark(mark) == [], "the run outlived its killed caller"


def test_cli_and_client_agree(client: confine.Client, workdir: Path) -> None:
    """The client's Result carries what `confine run --json` prints."""
    import subprocess
    p = subprocess.run([client.binary, "run", "--json", "--workdir", str(workdir), "--", "sh", "-c", "echo a; exit 5"],
                       capture_output=True)
    d = json.loads(p.stdout)
    r = client.run(["sh", "-c", "echo a; exit 5"], workdir=workdir)
    assert p.returncode == r.exit_status == 5
    assert (d["exit_code"], d["stdout"]["head"], d["backend"]) == (r.exit_code, r.stdout.head, r.backend)
    assert [g["name"] for g in d["guarantees"]] == [g.name for g in r.guarantees]


def test_unavailable_guarantees_parsed(tmp_path: Path, workdir: Path) -> None:
    """This host enforces every guarantee, so a refusal naming guarantees
    comes from a stand-in binary speaking confine's refusal object (the Go
    side's naming is internal/cli TestNamedGuarantees)."""
    refusal = {"error": {"kind": "unavailable", "exit_status": 125,
                         "message": "sandbox unavailable: no-foreign-signals needs landlock abi 6",
                         "guarantees": ["no-foreign-signals"]}}
    fake = write_exe(tmp_path / "confine-fake", "#!/bin/sh\n"
                     "if [ \"$1\" = version ]; then echo '{\"version\": \"fake\", \"json_api\": 4}'; exit 0; fi\n"
                     "echo '%s'; echo 'confine: %s' >&2; exit 125\n" % (json.dumps(refusal),
                                                                          refusal["error"]["message"]))
    with pytest.raises(confine.SandboxUnavailable) as ei:
        confine.Client(fake).run(["true"], workdir=workdir)
    assert ei.value.guarantees == ("no-foreign-signals",) and ei.value.exit_status == 125
    assert "landlock abi 6" in str(ei.value)


def test_no_json_refusal(tmp_path: Path, workdir: Path) -> None:
    """A bad flag value is refused by the flag parser before any JSON: the
    client still raises Refused with confine's message."""
    fake = write_exe(tmp_path / "confine-flag", "#!/bin/sh\n"
                     "if [ \"$1\" = version ]; then echo '{\"version\": \"fake\", \"json_api\": 4}'; exit 0; fi\n"
                     "echo 'confine: invalid argument \"x\" for \"--timeout\" flag' >&2; exit 125\n")
    with pytest.raises(confine.Refused) as ei:
        confine.Client(fake).run(["true"], workdir=workdir)
    assert ei.value.kind == "usage" and "--timeout" in ei.value.message


def test_result_mirrors_command_result() -> None:
    """Result has a field for every JSON field of spec.CommandResult (the
    Go struct, read from the repository), omitempty ones included."""
    import dataclasses
    import re
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "spec", "result.go")
    if not os.path.exists(src):
        pytest.skip("spec/result.go not found next to the tests (%s): not run from the repository" % src)
    text = open(src).read()
    body = text[text.index("type CommandResult struct {"):]
    body = body[:body.index("\n}\n")]
    go_fields = set(re.findall(r'json:"([a-z_]+)[,"]', body))
    py_fields = {f.name for f in dataclasses.fields(confine.Result)} - {"extra"}
    assert go_fields, "no json tags found in CommandResult"
    assert go_fields - py_fields == set(), "add these to python/confine/_result.py Result"
    assert py_fields - go_fields == set(), "Result fields CommandResult does not have"


def test_persistence_reported(client: confine.Client, workdir: Path, tmp_path: Path) -> None:
    """In a git work tree the guard keeps .git read-only; with the guard
    waived, a command that plants a git hook has it in its result."""
    os.makedirs(os.path.join(workdir, ".git", "hooks"))
    hook = os.path.join(workdir, ".git", "hooks", "pre-commit")
    r = client.run(["sh", "-c", "echo x > .git/hooks/pre-commit"], workdir=workdir)
    assert not r.ok and not os.path.exists(hook), r
    assert any(g.name == "no-git-persistence" and not g.waived for g in r.guarantees), r.guarantees
    waiver = tmp_path / "waive-git.toml"
    waiver.write_text('name = "git-writes"\nwaive = ["no-git-persistence"]\n')
    waiver.chmod(0o644)
    r = client.run(["sh", "-c", "echo x > .git/hooks/pre-commit"], workdir=workdir, profile=str(waiver))
    assert r.ok, r
    assert confine.Persistence(path=".git/hooks/pre-commit", kind="created", what="git hooks") in r.persistence, r.persistence


def test_binary_lookup(confine_bin: str, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without binary=, the client takes $CONFINE_BIN, then `confine` on
    PATH, never the current directory; a miss says how to fix it."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    # A `confine` in the current directory is never taken.
    planted = write_exe(workdir / "confine", "#!/bin/sh\ntouch %s/planted-ran\nexit 0\n" % tmp_path)
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.delenv("CONFINE_BIN", raising=False)
    with pytest.raises(confine.SandboxUnavailable) as ei:
        confine.Client().run(["true"], workdir=workdir)
    msg = ei.value.message
    assert ei.value.kind == "missing_binary" and "CONFINE_BIN" in msg and "PATH" in msg and "go build" in msg, msg
    assert not (tmp_path / "planted-ran").exists() and os.path.exists(planted)
    # $CONFINE_BIN, as a path.
    monkeypatch.setenv("CONFINE_BIN", confine_bin)
    assert confine.Client().binary == confine_bin
    assert confine.Client().run(["echo", "via-env"], workdir=workdir).stdout.text == "via-env\n"
    # $CONFINE_BIN naming nothing: the message names the variable.
    monkeypatch.setenv("CONFINE_BIN", str(tmp_path / "nothing-here"))
    with pytest.raises(confine.SandboxUnavailable) as ei:
        confine.Client().binary
    assert "CONFINE_BIN=" in ei.value.message and "nothing-here" in ei.value.message
    # PATH, when the variable is unset.
    monkeypatch.delenv("CONFINE_BIN")
    os.symlink(confine_bin, str(empty / "confine"))
    assert confine.Client().binary == str(empty / "confine")
    # An explicit binary wins over both.
    assert confine.Client(confine_bin).binary == confine_bin


def test_output_bytes_exact(client: confine.Client, workdir: Path) -> None:
    """Bytes that are not UTF-8 come back exactly (data), and as text with
    U+FFFD; head and tail of a truncated stream too."""
    r = client.run(["printf", r"a\377\376\000b\n"], workdir=workdir)
    assert r.stdout.data == b"a\xff\xfe\x00b\n", r.stdout
    assert r.stdout.text == "a\ufffd\ufffd\x00b\n"
    r = client.run(["sh", "-c", r"printf '\377start'; head -c 5000 /dev/zero | tr '\0' x; printf 'end\376'"],
                   workdir=workdir, output_limit=100)
    assert r.stdout.truncated and r.stdout.head_bytes.startswith(b"\xffstart"), r.stdout
    assert r.stdout.tail_bytes.endswith(b"end\xfe"), r.stdout
    assert r.stdout.data.startswith(r.stdout.head_bytes) and r.stdout.data.endswith(r.stdout.tail_bytes)


def test_live_output_callback(client: confine.Client, workdir: Path) -> None:
    """on_output sees each chunk as it is written, before the run ends: the
    command waits for a file that only the callback creates."""
    gate = workdir / "gate"
    seen = []

    def on_output(stream: str, chunk: bytes) -> None:
        seen.append((stream, chunk))
        if b"waiting" in chunk:
            gate.write_text("go")
    r = client.run(["sh", "-c", "echo waiting; while [ ! -e gate ]; do sleep 0.05; done; printf 'e\\377' >&2; echo done"],
                   workdir=workdir, timeout=60, on_output=on_output)
    assert r.ok, r
    out = b"".join(c for s, c in seen if s == "stdout")
    err = b"".join(c for s, c in seen if s == "stderr")
    assert out == b"waiting\ndone\n" and err == b"e\xff", seen
    assert r.stdout.data == out and r.stderr.data == err
    # Input still reaches the command; a refusal still raises.
    r = client.run(["cat"], workdir=workdir, input=b"in\xff", on_output=lambda s, c: None)
    assert r.stdout.data == b"in\xff"
    with pytest.raises(confine.Refused) as ei:
        client.run(["/nonexistent/prog"], workdir=workdir, on_output=lambda s, c: None)
    assert ei.value.exit_status == 127


def test_live_output_async(client: confine.Client, workdir: Path) -> None:
    seen = []
    r = asyncio.run(client.run_async(["sh", "-c", "echo one; echo two >&2"], workdir=workdir,
                                     on_output=lambda s, c: seen.append((s, c))))
    assert r.ok
    assert b"".join(c for s, c in seen if s == "stdout") == b"one\n"
    assert b"".join(c for s, c in seen if s == "stderr") == b"two\n"


def test_check_raises(client: confine.Client, workdir: Path) -> None:
    """check=True: a non-zero status raises CommandFailed with the result;
    zero returns it."""
    assert client.run(["true"], workdir=workdir, check=True).ok
    for argv, status in ((["sh", "-c", "exit 3"], 3), (["sh", "-c", "kill -TERM $$"], 128 + 15)):
        with pytest.raises(confine.CommandFailed) as ei:
            client.run(argv, workdir=workdir, check=True)
        assert ei.value.exit_status == status and ei.value.result.exit_status == status
    with pytest.raises(confine.CommandFailed):
        asyncio.run(client.run_async(["false"], workdir=workdir, check=True))
