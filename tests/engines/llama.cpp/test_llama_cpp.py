"""llama.cpp: maskd's llama-cpp-python LogitsProcessor (maskd.integrations.llama_cpp)
through real llama-cpp-python generation with the tiny GGUF (bench/engines/tiny_gguf.py)
and a real maskd, and the C++ sampler's test program (client/llama_sampler) when built.

Every output is checked by a matcher that is not maskd: Python's `regex`, `jsonschema`
and `lark`, and for GBNF llama.cpp's own grammar sampler (llama_sampler_init_grammar,
fed the generated tokens one by one). Run by scripts/test-engines.sh llama.cpp in the
venv of tests/engines/llama.cpp/install.sh.
"""
from __future__ import annotations

import ctypes
import json
import math
import os
import pathlib
import subprocess
import sys
from typing import List

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
try:
    import maskd  # noqa: F401  (installed by scripts/engine_venv.sh)
except ImportError:
    sys.path.insert(0, str(REPO / "client" / "python"))
sys.path.insert(0, str(REPO / "bench" / "engines"))

import llama_cpp  # noqa: E402

import check  # noqa: E402
import engine_llama_cpp as eng  # noqa: E402
from common import E2EContext, Request  # noqa: E402
from maskd.integrations.llama_cpp import MaskdLogitsProcessor  # noqa: E402
from tiny_gguf import gguf_model_path  # noqa: E402

MAX_TOKENS = 48
CASES = [
    Request("phone", "regex", r"[0-9]{3}-[0-9]{4}( ext\. [0-9]{1,3})?"),
    Request("person", "json_schema", json.dumps({
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 8},
                       "age": {"type": "integer", "minimum": 0, "maximum": 120}},
        "required": ["name", "age"], "additionalProperties": False})),
    Request("lists", "lark", 'start: list\nlist: "[" [value ("," value)*] "]"\n'
            '?value: list | NUM\nNUM: /0|[1-9][0-9]{0,3}/\n'),
    Request("sum", "gbnf", 'root ::= term ("+" term)*\nterm ::= [0-9]{1,3} | "(" root ")"\n'),
]


@pytest.fixture(scope="module")
def llm():
    model = eng.load()
    yield model
    model.close()


@pytest.fixture(scope="module")
def prompt(llm) -> List[int]:
    return llm.tokenize(b"Answer in the requested format:", add_bos=False, special=True)


def gbnf_accepts(llm, grammar: str, ids: List[int], eos: int) -> bool:
    """Whether llama.cpp's grammar sampler accepts ids then `eos` (the grammar ends)."""
    smpl = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, grammar.encode(), b"root")
    assert smpl, "llama.cpp did not parse the grammar"
    try:
        for t in ids + [eos]:
            cell = (llama_cpp.llama_token_data * 1)(llama_cpp.llama_token_data(t, 0.0, 0.0))
            cur = llama_cpp.llama_token_data_array(cell, 1, -1, False)
            llama_cpp.llama_sampler_apply(smpl, ctypes.byref(cur))
            if math.isinf(cell[0].logit):
                return False
            llama_cpp.llama_sampler_accept(smpl, t)
        return True
    finally:
        llama_cpp.llama_sampler_free(smpl)


def valid(llm, req: Request, text: str, ids: List[int]) -> bool:
    if req.kind == "gbnf":
        return gbnf_accepts(llm, req.constraint, ids, eos=151645)
    return check.check(req, text, True) is True


@pytest.mark.parametrize("req", CASES, ids=[c.kind for c in CASES])
@pytest.mark.parametrize("seed", [0, 1])
def test_processor_output_is_valid(llm, prompt, maskd_addr, req: Request, seed: int) -> None:
    with eng.maskd_processor(maskd_addr, "qwen3", req, MAX_TOKENS) as proc:
        ids, finished, _ = eng.generate(llm, prompt, MAX_TOKENS, seed, proc)
        assert proc.generated == ids  # maskd saw exactly the sampled tokens
    text = eng.text_of(llm, ids)
    # Budget mode: the output closes within max_tokens.
    assert finished, (text, ids)
    assert valid(llm, req, text, ids), (text, ids)


def test_unconstrained_output_would_fail(llm, prompt) -> None:
    """The matchers can fail: unconstrained text of the random model is not a phone number."""
    ids, _, _ = eng.generate(llm, prompt, 8, 0)
    assert not valid(llm, CASES[0], eng.text_of(llm, ids), ids)
    assert not gbnf_accepts(llm, CASES[3].constraint, ids, eos=151645)


def test_processor_masks_padding_ids_and_strided_scores(maskd_addr) -> None:
    """llama-cpp-python hands a strided view (the logit field of llama_token_data); ids
    past the tokenizer's 151,669 (Qwen3's padding) are masked; a new context starts over."""
    with MaskdLogitsProcessor(maskd_addr, "qwen3", regex="[0-9]+") as proc:
        rec = np.zeros(151936, dtype=[("id", np.intc), ("logit", np.single), ("p", np.single)])
        out = proc(np.array([1, 2, 3], np.intc), rec["logit"])
        allowed = np.flatnonzero(np.isfinite(out))
        assert 0 < len(allowed) < 1000 and allowed.max() < 151669
        assert np.array_equal(np.flatnonzero(np.isfinite(rec["logit"])), allowed)  # in place
        digit = int(allowed[0])
        rec["logit"] = 0
        proc(np.array([1, 2, 3, digit], np.intc), rec["logit"])
        assert proc.generated == [digit]
        rec["logit"] = 0
        proc(np.array([9, 9], np.intc), rec["logit"])  # not a continuation: new session
        assert proc.generated == []


@pytest.mark.parametrize("backend", ["maskd", "builtin"])
def test_engine_run(maskd_addr, backend: str) -> None:
    """bench/engines/engine_llama_cpp.py as e2e.py calls it."""
    ctx = E2EContext(engine="llama.cpp", requests=CASES, maskd_addr=maskd_addr,
                     backend=backend, max_tokens=MAX_TOKENS, batch=1, seed=3,
                     model_dir=pathlib.Path("/nonexistent"))
    res = eng.run(ctx)
    by_id = {r.id: r for r in CASES}
    if backend == "maskd":
        assert [s.id for s in res.samples] == [r.id for r in CASES]
        assert all(s.finished for s in res.samples)
    else:
        # llama.cpp's grammar sampler: GBNF and JSON Schema; regex and Lark skipped.
        assert [s.id for s in res.samples] == ["person", "sum"] and res.notes
    llm = eng.load()
    try:
        for s in res.samples:
            if s.finished:
                assert valid(llm, by_id[s.id], s.text, s.token_ids), s
    finally:
        llm.close()
    assert res.decode_steps == len(res.step_ms) > 0 and res.unconstrained_ms_per_step > 0


def sampler_test_binary() -> pathlib.Path:
    return pathlib.Path(os.environ.get(
        "MASKD_LLAMA_SAMPLER_TEST", REPO / "build-llama" / "bin" / "maskd_llama_sampler_test"))


@pytest.mark.skipif(not sampler_test_binary().exists(),
                    reason="C++ sampler not built (tests/engines/llama.cpp/build_sampler.sh)")
def test_cxx_sampler(llm, maskd_addr) -> None:
    """client/llama_sampler's test program: its own checks (exit 0), then its outputs
    checked here by the independent matchers."""
    p = subprocess.run([str(sampler_test_binary()), str(gguf_model_path()), maskd_addr],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode != 127, ("stale build (its libllama is gone): run "
                                 "tests/engines/llama.cpp/build_sampler.sh VENV again: " + p.stderr)
    assert p.returncode == 0, p.stderr[-4000:]
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.startswith("{")]
    assert len(lines) == 15  # 5 constraints x 3 chains
    for rec in lines:
        req = Request(rec["case"], rec["kind"], rec["constraint"])
        assert rec["finished"], rec
        assert valid(llm, req, rec["text"], rec["tokens"]), rec
