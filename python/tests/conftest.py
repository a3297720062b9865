"""Fixtures: the confine binary under test and a client for it.

CONFINE_BIN names the binary (.ci/run builds it once); without it the
tests build ./cmd/confine with the Go toolchain into a temporary directory.
"""

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import confine  # the installed package (.ci/python.sh installs it)
except ImportError:
    sys.path.insert(0, os.path.join(ROOT, "python"))
    import confine  # noqa: F401


@pytest.fixture(scope="session")
def confine_bin(tmp_path_factory):
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
def client(confine_bin):
    return confine.Client(confine_bin)


@pytest.fixture
def workdir(tmp_path):
    # The command runs as the work directory's owner: keep it ours.
    d = tmp_path / "wd"
    d.mkdir()
    return d
