"""Fixtures for the Python tests: a real maskd binary on a temporary unix socket,
the bundled Qwen3 tokenizer (data/tokenizers/qwen3), and helpers.

The binary is $MASKD_BIN, else build/bin/maskd of this checkout.
"""
from __future__ import annotations

import gzip
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Iterator, List

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO / "data" / "tokenizers"


def maskd_bin() -> pathlib.Path:
    p = pathlib.Path(os.environ.get("MASKD_BIN", REPO / "build" / "bin" / "maskd"))
    if not p.exists():
        pytest.fail(f"maskd binary not found at {p} (build it, or set MASKD_BIN)")
    return p


class MaskdServer:
    """A maskd process on unix://<tmp>/maskd.sock; stopped with SIGTERM."""

    def __init__(self, flags: List[str] = ()):
        self.dir = tempfile.mkdtemp(prefix="maskd-py-")
        self.addr = f"unix://{self.dir}/maskd.sock"
        self.log_path = os.path.join(self.dir, "maskd.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [str(maskd_bin()), f"--listen={self.addr}", "--metrics-listen=",
             f"--tokenizer-dir={TOKENIZER_DIR}", *flags],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if " INFO start " in self.log():
                return
            if self.proc.poll() is not None:
                raise RuntimeError(f"maskd exited ({self.proc.returncode}): {self.log()}")
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"maskd did not start within 60 s: {self.log()}")

    def log(self) -> str:
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def server() -> Iterator[MaskdServer]:
    s = MaskdServer(["--allow_shm"])
    yield s
    s.stop()


@pytest.fixture(scope="session")
def addr(server: MaskdServer) -> str:
    return server.addr


@pytest.fixture()
def client(addr: str):
    import maskd

    with maskd.Client(addr, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def qwen3_dir() -> Iterator[pathlib.Path]:
    """A temporary folder with the bundled Qwen3 tokenizer.json (decompressed) and config."""
    d = pathlib.Path(tempfile.mkdtemp(prefix="maskd-qwen3-"))
    with gzip.open(TOKENIZER_DIR / "qwen3" / "tokenizer.json.gz") as f:
        (d / "tokenizer.json").write_bytes(f.read())
    shutil.copy(TOKENIZER_DIR / "qwen3" / "tokenizer_config.json", d / "tokenizer_config.json")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def need(module: str):
    """Imports an optional dependency; skips when absent, unless MASKD_PY_STRICT=1
    (scripts/python_test.sh sets it: there a missing package is a failure, not a skip)."""
    if os.environ.get("MASKD_PY_STRICT") == "1":
        import importlib

        return importlib.import_module(module)
    return pytest.importorskip(module)
