"""scripts/engine_e2e.sh's Python side, through the real engine named by
$MASKD_E2E_ENGINE (scripts/test-engines.sh sets it and runs this file in that engine's
venv): bench/engines/constraints.jsonl (a regex, a JSON Schema, a Lark and a GBNF
grammar), two seeds, with maskd and with the engine's own backend; every output is
checked by an independent matcher (bench/engines/check.py) and the server's counters
must show that maskd did the work."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
ENGINE = os.environ.get("MASKD_E2E_ENGINE")
CONSTRAINTS = REPO / "bench" / "engines" / "constraints.jsonl"

pytestmark = pytest.mark.skipif(not ENGINE, reason="MASKD_E2E_ENGINE not set "
                                "(scripts/test-engines.sh sets it)")


def e2e(tmp_path: pathlib.Path, *args: str) -> tuple:
    out = tmp_path / "out.jsonl"
    p = subprocess.run([sys.executable, str(REPO / "bench" / "engines" / "e2e.py"), ENGINE,
                        "--constraints", str(CONSTRAINTS), "--out", str(out), *args],
                       capture_output=True, text=True, timeout=900)
    lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    return p, lines


@pytest.mark.parametrize("seed", [1, 2])
def test_maskd_outputs_are_valid_and_finished(tmp_path: pathlib.Path, seed: int) -> None:
    p, lines = e2e(tmp_path, "--backend", "maskd", "--max-tokens", "48", "--seed", str(seed))
    assert p.returncode == 0, p.stderr[-4000:]
    samples, summary = lines[:-1], lines[-1]
    assert summary["summary"] and summary["engine"] == ENGINE and summary["backend"] == "maskd"
    assert len(samples) == summary["requests"] == 4
    assert summary["violations"] == 0, samples
    # Budget mode: every output ends within max_tokens, so every one is checked.
    assert all(s["finished"] for s in samples), samples
    assert all(s["valid"] is True for s in samples if s["id"] != "sum"), samples
    for s in samples:
        assert set(s) >= {"id", "engine", "engine_version", "backend", "text", "token_ids",
                          "finished"}
        assert len(s["token_ids"]) <= 48
    work = summary["maskd_work"]
    assert work["maskd_tokens_advanced_total"] > 0, work
    assert work["maskd_step_batch_size_count"] + work["maskd_mask_seconds_count"] > 0, work
    assert summary["ms_per_step"] > 0 and summary["unconstrained_ms_per_step"] > 0


def test_bad_input_is_refused_with_the_line(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "in.jsonl"
    bad.write_text('{"id": "a", "kind": "regex", "constraint": "a"}\n{"id": "b", "kind": "xml"}\n')
    p = subprocess.run([sys.executable, str(REPO / "bench" / "engines" / "e2e.py"), ENGINE,
                        "--constraints", str(bad), "--out", str(tmp_path / "o.jsonl")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2
    assert "in.jsonl:2" in p.stderr
