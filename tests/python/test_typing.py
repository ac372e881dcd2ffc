"""The package's strict type check: mypy over client/python with the settings of its
pyproject.toml ([tool.mypy]: strict, Python 3.10), the mypy and stub versions of
requirements.lock. No maskd binary needed."""
from __future__ import annotations

import pathlib
import subprocess
import sys

from conftest import REPO, need

PACKAGE = REPO / "client" / "python"


def mypy(tmp_path: pathlib.Path, *files: str) -> subprocess.CompletedProcess[str]:
    """mypy in client/python with its pyproject's settings; ``files`` replace its own list."""
    need("mypy")
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(PACKAGE / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "mypy-cache"), *files],
        cwd=PACKAGE, capture_output=True, text=True, timeout=600)


def test_package_passes_mypy_strict(tmp_path: pathlib.Path) -> None:
    r = mypy(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout, r.stdout


def test_the_settings_are_strict(tmp_path: pathlib.Path) -> None:
    # The check above means something only if the settings catch what --strict catches:
    # an unannotated function and an Any returned as a str.
    loose = tmp_path / "loose.py"
    loose.write_text("import json\n\n"
                     "def untyped(x):\n    return x\n\n"
                     "def name(text: str) -> str:\n    return json.loads(text)\n")
    r = mypy(tmp_path, str(loose))
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[no-untyped-def]" in r.stdout and "[no-any-return]" in r.stdout, r.stdout
