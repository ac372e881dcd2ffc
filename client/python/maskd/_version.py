"""The package's version, written once: ``version`` in client/python/pyproject.toml.

An installed package reads it from its metadata. Run from a source tree that was never
installed (``PYTHONPATH=client/python``) it reads the pyproject.toml beside the package;
with neither (a copy of the bare folder) it is "0+unknown".
"""
from __future__ import annotations

import pathlib
import re
from importlib import metadata

_PYPROJECT = pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml"
_FALLBACK = "0+unknown"


def _source_version() -> str:
    """``version = "..."`` of the [project] table of the pyproject.toml beside the package
    (the line the build reads; a regex: tomllib is Python 3.11+ and this runs on 3.10)."""
    try:
        text = _PYPROJECT.read_text(encoding="utf-8")
    except OSError:
        return _FALLBACK
    project = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
    found = project and re.search(r'^version\s*=\s*"([^"]+)"', project.group(1), re.M)
    return found.group(1) if found else _FALLBACK


def _version() -> str:
    try:
        return metadata.version("maskd")
    except metadata.PackageNotFoundError:
        return _source_version()


__version__ = _version()
