"""A PEP 517 build backend for the confine client, standard library only.

The package is pure Python with no dependencies, so a wheel is a zip of
confine/ plus its metadata. Building it here rather than with setuptools
lets `pip install ./python` work with no network: pip installs a backend's
requirements into an isolated environment from an index first, and this
backend has none.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import sys
import tarfile
import zipfile
from typing import Any, Mapping, Optional

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PACKAGE = "confine"
_TAG = "py3-none-any"


def _project() -> dict[str, str]:
    """The [project] table's string values from pyproject.toml."""
    text = open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8").read()
    if sys.version_info >= (3, 11):
        import tomllib

        return {k: v for k, v in tomllib.loads(text)["project"].items() if isinstance(v, str)}
    # Older Pythons: the table holds only `key = "string"` lines.
    out: dict[str, str] = {}
    section: Optional[str] = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == "[project]":
            m = re.match(r'^([A-Za-z0-9_-]+)\s*=\s*"([^"]*)"\s*$', line)
            if m:
                out[m.group(1)] = m.group(2)
    return out


def _metadata(p: Mapping[str, str]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        "Name: " + p["name"],
        "Version: " + p["version"],
        "Summary: " + p.get("description", ""),
    ]
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    return "\n".join(lines) + "\n"


def _normalized(name: str) -> str:
    """The distribution name as file names spell it (PEP 427, PEP 625):
    runs of -, _ and . become one underscore."""
    return re.sub(r"[-_.]+", "_", name).lower()


def _dist_info(p: Mapping[str, str]) -> str:
    return "%s-%s.dist-info" % (_normalized(p["name"]), p["version"])


def _sources() -> list[tuple[str, str]]:
    """(archive name, path) of every file of the package, sorted."""
    out: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(os.path.join(_ROOT, _PACKAGE)):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith((".py", ".typed")):
                path = os.path.join(dirpath, f)
                out.append((os.path.relpath(path, _ROOT).replace(os.sep, "/"), path))
    return out


def _write_wheel(wheel_directory: str, files: Mapping[str, bytes]) -> str:
    """Write a wheel holding files ({archive name: bytes}) plus RECORD."""
    p = _project()
    info = _dist_info(p)
    files = dict(files)
    files[info + "/METADATA"] = _metadata(p).encode()
    files[info + "/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: confine_build\nRoot-Is-Purelib: true\nTag: %s\n" % _TAG
    ).encode()
    record: list[str] = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = "%s-%s-%s.whl" % (_normalized(p["name"]), p["version"], _TAG)
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            z.writestr(zi, data, zipfile.ZIP_DEFLATED)
    return name


def get_requires_for_build_wheel(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict[str, Any]] = None) -> list[str]:
    return []


def build_wheel(
    wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    files: dict[str, bytes] = {}
    for arc, path in _sources():
        with open(path, "rb") as f:
            files[arc] = f.read()
    return _write_wheel(wheel_directory, files)


def build_editable(
    wheel_directory: str, config_settings: Optional[dict[str, Any]] = None, metadata_directory: Optional[str] = None
) -> str:
    # A .pth file puts the source tree on sys.path (PEP 660).
    return _write_wheel(wheel_directory, {"confine_editable.pth": (_ROOT + "\n").encode()})


def build_sdist(sdist_directory: str, config_settings: Optional[dict[str, Any]] = None) -> str:
    p = _project()
    base = "%s-%s" % (_normalized(p["name"]), p["version"])
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        extra = [("pyproject.toml", os.path.join(_ROOT, "pyproject.toml")),
                 ("_build/confine_build.py", os.path.abspath(__file__))]
        for arc, path in extra + _sources():
            t.add(path, arcname=base + "/" + arc)
        pkg_info = _metadata(p).encode()
        ti = tarfile.TarInfo(base + "/PKG-INFO")
        ti.size = len(pkg_info)
        t.addfile(ti, io.BytesIO(pkg_info))
    return name
