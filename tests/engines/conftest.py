"""Fixtures for the engine tests (tests/engines/ENGINE, run by scripts/test-engines.sh in
that engine's venv): a real maskd on a private unix socket (the same server class as
tests/python's), and the repository's paths."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from typing import Iterator

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "bench" / "engines"))


def _python_fixtures():
    spec = importlib.util.spec_from_file_location("maskd_python_fixtures",
                                                  REPO / "tests" / "python" / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


MaskdServer = _python_fixtures().MaskdServer


@pytest.fixture(scope="session")
def maskd_server() -> Iterator["MaskdServer"]:
    s = MaskdServer([])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def maskd_addr(maskd_server) -> str:
    return maskd_server.addr
