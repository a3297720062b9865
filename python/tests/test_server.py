"""The Python client through `confine serve` (Client(server=...) and
$CONFINE_SERVER): the same results and refusals as a direct run, a
refusal when no server answers, and cancellation ending the tree."""

import signal
import subprocess
import uuid

from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple, Type

import pytest

import confine

from conftest import cancel_when_up, pids_with_mark


@pytest.fixture
def server(confine_bin: str, tmp_path: Path) -> Iterator[str]:
    """A `confine serve` of ours on a socket in a 0700 directory."""
    d = tmp_path / "srv"
    d.mkdir(mode=0o700)
    sock = str(d / "serve.sock")
    p = subprocess.Popen([confine_bin, "serve", "--socket", sock], stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert p.stderr is not None
    line = p.stderr.readline().decode()
    if "serving uid" not in line:
        p.kill()
        pytest.fail("confine serve did not start: %r" % (line + p.stderr.read().decode()))
    yield sock
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=60)


def comparable(r: confine.Result) -> Tuple[Any, ...]:
    return (r.exit_code, r.signal, str(r.stdout), str(r.stderr), r.backend, tuple(r.layers),
            tuple((g.name, g.mechanism) for g in r.guarantees))


def test_same_as_direct(confine_bin: str, server: str, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYCLIENT_PASSED", "yes")
    monkeypatch.setenv("PYCLIENT_NOT_PASSED", "secret")
    argv = ["sh", "-c", 'echo out; echo err >&2; echo "$FOO|$PYCLIENT_PASSED|$PYCLIENT_NOT_PASSED|$LANG"; cat; exit 3']
    kw: Dict[str, Any] = dict(workdir=workdir, env={"FOO": "bar", "PYCLIENT_PASSED": None}, input=b"in\n", event_log="off")
    direct = confine.Client(confine_bin, server=False).run(argv, **kw)
    via = confine.Client(confine_bin, server=server).run(argv, **kw)
    assert comparable(via) == comparable(direct)
    assert str(via.stdout) == "out\nbar|yes||C.UTF-8\nin\n" and via.exit_code == 3
    assert via.run_id != direct.run_id


@pytest.mark.parametrize("argv,exc,status", [
    (["/nonexistent"], confine.Refused, 127),
    (["true"], confine.Refused, 125),  # with a refused variable, below
])
def test_refusals_as_direct(confine_bin: str, server: str, workdir: Path, argv: List[str], exc: Type[confine.Refused], status: int) -> None:
    env = {"LD_PRELOAD": "/x.so"} if status == 125 else None
    errs = []
    for c in (confine.Client(confine_bin, server=False), confine.Client(confine_bin, server=server)):
        with pytest.raises(exc) as e:
            c.run(argv, workdir=workdir, env=env, event_log="off")
        errs.append((e.value.kind, e.value.exit_status, e.value.message))
    assert errs[0] == errs[1] and errs[0][1] == status


def test_no_server_refuses(confine_bin: str, workdir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sock = str(tmp_path / "none.sock")
    marker = workdir / "ran"
    for c in (confine.Client(confine_bin, server=sock), None):
        if c is None:
            monkeypatch.setenv("CONFINE_SERVER", sock)
            c = confine.Client(confine_bin)
            assert c.server == sock
        with pytest.raises(confine.SandboxUnavailable) as e:
            c.run(["touch", str(marker)], workdir=workdir)
        assert e.value.kind == "no_server" and sock in e.value.message
        assert not marker.exists(), "a run went ahead without its server"


def test_cancel_kills_tree(confine_bin: str, server: str, workdir: Path) -> None:
    client = confine.Client(confine_bin, server=server)
    mark = "pyserve-" + uuid.uuid4().hex
    script = "(setsid sh -c 'echo x > up.daemon; sleep 300' &); sleep 300 & echo x > up.child; wait"

    alive = cancel_when_up(client, script, workdir, mark, ("up.daemon", "up.child"))
    assert len(alive) >= 3, alive
    assert pids_with_mark(mark) == [], "survivors of a cancelled run"


def test_server_bytes_check_and_no_live_output(confine_bin: str, server: str, workdir: Path) -> None:
    """Through a server: exact bytes and check=True as in a direct run;
    on_output, which needs a direct run's pipes, is refused before
    anything runs."""
    c = confine.Client(confine_bin, server=server)
    r = c.run(["printf", r"a\377b"], workdir=workdir, event_log="off")
    assert r.stdout.data == b"a\xffb", r.stdout
    with pytest.raises(confine.CommandFailed) as ei:
        c.run(["sh", "-c", "exit 4"], workdir=workdir, check=True, event_log="off")
    assert ei.value.exit_status == 4
    with pytest.raises(ValueError):
        c.run(["true"], workdir=workdir, on_output=lambda s, b: None)


def test_module_run_server_starts_no_binary(confine_bin: str, server: str, workdir: Path) -> None:
    """confine.run(..., server=SOCKET) speaks to the server over its socket:
    with a default client whose binary does not exist it still runs (no
    confine process is started here); server=False runs directly, which
    then fails closed."""
    before = confine.default_client()
    confine.set_default_client(confine.Client("/nonexistent/confine"))
    try:
        r = confine.run(["sh", "-c", "echo via"], workdir=workdir, server=server, event_log="off")
        assert str(r.stdout) == "via\n" and r.exit_code == 0
        with pytest.raises(confine.SandboxUnavailable):
            confine.run(["true"], workdir=workdir, server=False, event_log="off")
    finally:
        confine.set_default_client(before)


def test_server_runs_start_clean(confine_bin: str, server: str, workdir: Path) -> None:
    """Each run through the server gets a private HOME and TMPDIR of its
    own, empty, whatever the run before it left there."""
    c = confine.Client(confine_bin, server=server)
    script = 'ls -A "$HOME" "$TMPDIR"; echo planted > "$HOME/.profile"; echo x > "$TMPDIR/f"; echo "$HOME|$TMPDIR"'
    seen = set()
    for _ in range(4):
        r = c.run(["sh", "-c", script], workdir=workdir, event_log="off")
        lines = str(r.stdout).splitlines()
        assert r.exit_code == 0 and "planted" not in str(r.stdout)
        assert [ln for ln in lines[:-1] if ln and not ln.endswith(":")] == [], lines
        assert lines[-1] not in seen, "a private directory was handed out twice: %s" % lines[-1]
        seen.add(lines[-1])


def test_guard_profile_as_direct(confine_bin: str, server: str, workdir: Path, tmp_path: Path) -> None:
    """A profile file's [guard] (docs/guard.md) holds through the client,
    direct and through the server: its refused entries stay unchanged,
    its reported ones are written and in the result's persistence list,
    and no-git-persistence is waived where it moves a git row."""
    prof = tmp_path / "guard.toml"
    prof.write_text('name = "guard-changes"\n[guard]\nrefuse = ["envrc"]\nreport = ["git-hooks"]\n'
                    '[guard.add.makefile]\npattern = "**/Makefile"\naction = "refuse"\n')
    argv = ["sh", "-c", "echo x >> src/Makefile; echo x >> .envrc; echo h > .git/hooks/post-checkout; cat src/Makefile .envrc"]
    results = []
    for c in (confine.Client(confine_bin, server=False), confine.Client(confine_bin, server=server)):
        (workdir / ".git" / "hooks").mkdir(parents=True, exist_ok=True)
        (workdir / ".git" / "HEAD").write_text("ref\n")
        (workdir / "src").mkdir(exist_ok=True)
        (workdir / "src" / "Makefile").write_text("m\n")
        (workdir / ".envrc").write_text("e\n")
        hook = workdir / ".git" / "hooks" / "post-checkout"
        if hook.exists():
            hook.unlink()
        r = c.run(argv, workdir=workdir, profile=str(prof), event_log="off")
        assert str(r.stdout) == "m\ne\n" and r.exit_code == 0
        assert [(p.kind, p.path) for p in r.persistence] == [("created", ".git/hooks/post-checkout")]
        assert [g.waived for g in r.guarantees if g.name == "no-git-persistence"] == [True]
        results.append(comparable(r))
    assert results[0] == results[1]


def test_receive_answer_then_reset(tmp_path: Path) -> None:
    """A server that answers and closes with our request unread (a busy
    refusal made before reading) resets the connection after its answer:
    the raw read fails (the control), receive returns the answer."""
    import json
    import socket

    from confine import _server

    answer = {"error": {"kind": "busy", "message": "at the cap", "exit_status": 125}}
    path = str(tmp_path / "s.sock")
    for control in (True, False):
        ln = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ln.bind(path)
        ln.listen(1)
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.connect(path)
        c.sendall(b"\x00\x00\x00\x02{}")
        srv, _ = ln.accept()
        srv.sendall(json.dumps(answer).encode() + b"\n")
        srv.close()  # the request unread: the kernel resets the connection
        ln.close()
        (tmp_path / "s.sock").unlink()
        try:
            if control:
                with pytest.raises(ConnectionResetError):
                    while c.recv(1 << 16):
                        pass
            else:
                assert _server.receive(c, path) == answer
        finally:
            c.close()
