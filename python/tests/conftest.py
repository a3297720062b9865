"""Fixtures: the confine binary under test and a client for it.

CONFINE_BIN names the binary (.ci/run builds it once); without it the
tests build ./cmd/confine with the Go toolchain into a temporary directory.
"""

import asyncio
import os
import shutil
import subprocess
import sys

from pathlib import Path
from typing import Any, List, Sequence

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import confine  # the installed package (.ci/python.sh installs it)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import confine  # noqa: F401


@pytest.fixture(scope="session")
def confine_bin(tmp_path_factory: pytest.TempPathFactory) -> str:
    b = os.environ.get("CONFINE_BIN")
    if b:
        return os.path.abspath(b)
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    if go is None:
        pytest.skip("no CONFINE_BIN and no Go toolchain to build ./cmd/confine with")
    out = str(tmp_path_factory.mktemp("bin") / "confine")
    env = dict(os.environ, CGO_ENABLED="0")
    subprocess.run([go, "build", "-o", out, "./cmd/confine"], cwd=ROOT, env=env, check=True)
    return out


@pytest.fixture
def client(confine_bin: str) -> confine.Client:
    return confine.Client(confine_bin)


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    # The command runs as the work directory's owner: keep it ours.
    d = tmp_path / "wd"
    d.mkdir()
    return d


def pids_with_mark(mark: str) -> List[int]:
    """Host pids of live (not zombie) processes whose environment holds
    mark: the run's processes, whatever PID namespace they are in."""
    needle = mark.encode()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/environ" % d, "rb") as f:
                if needle not in f.read():
                    continue
            with open("/proc/%s/stat" % d) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    continue
        except OSError:
            continue
        out.append(int(d))
    return out


def cancel_when_up(client: confine.Client, script: str, workdir: Path, mark: str, files: Sequence[str], **kw: Any) -> List[int]:
    """Run `sh -c script` under client (asyncio, PYCLIENT_MARK=mark in its
    environment), wait until every one of files in workdir is non-empty
    (the tree is up), then cancel the task. Returns the marked pids alive
    just before the cancel; the caller checks none is left after it."""
    async def main() -> List[int]:
        t = asyncio.create_task(client.run_async(["sh", "-c", script], workdir=workdir,
                                                 env={"PYCLIENT_MARK": mark}, kill_grace=0.5, **kw))
        while not all((workdir / f).exists() and (workdir / f).read_text().strip() for f in files):
            assert not t.done(), t.result()
            await asyncio.sleep(0.02)
        alive = pids_with_mark(mark)
        t.cancel()
        with pytest.raises(asyncio.CancelledError):
            await t
        return alive
    return asyncio.run(main())
