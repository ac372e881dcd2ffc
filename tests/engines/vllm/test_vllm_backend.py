"""maskd as vLLM's structured-output backend (maskd.integrations.vllm), against a real maskd
and a real vLLM (CPU build, tests/engines/vllm/install.sh; run by scripts/test-engines.sh).

Unit tests drive MaskdBackend / MaskdGrammar the way vLLM's StructuredOutputManager does and
compare every bitmask row with maskd's stateless Mask RPC after the same tokens (a replay
from the start: no session state involved). The end-to-end test generates through
``vllm.LLM`` with nothing but MASKD_VLLM_ADDR set (docs/engines.md, "vLLM") and checks
every output with an independent matcher (regex, jsonschema, lark).
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import random
import re
import subprocess
import sys
from typing import Any, Iterator, List, Optional

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(REPO / "bench" / "engines"))

import tiny_model  # noqa: E402


def _python_conftest() -> Any:
    """tests/python/conftest.py (its MaskdServer), loaded under a name of its own."""
    spec = importlib.util.spec_from_file_location("maskd_python_conftest",
                                                  REPO / "tests" / "python" / "conftest.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MaskdServer = _python_conftest().MaskdServer

import maskd  # noqa: E402
from vllm.tokenizers import get_tokenizer  # noqa: E402
from vllm.v1.structured_output.backend_types import StructuredOutputOptions as Opt  # noqa: E402

from maskd.integrations.vllm import MaskdBackend, MaskdGrammar  # noqa: E402

EOS = tiny_model.EOS_IDS
WIDTH = tiny_model.SHAPE["vocab_size"]  # the model's logits width (> the tokenizer's ids)

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 8},
                         "n": {"type": "integer", "minimum": 0, "maximum": 999},
                         "ok": {"type": "boolean"}},
          "required": ["name", "n", "ok"], "additionalProperties": False}
REGEX = r"(cat|dog)s? [0-9]{2,4}"
LARK = 'start: pair ("," pair)*\npair: KEY "=" VALUE\nKEY: /[a-z]{1,4}/\nVALUE: /[0-9]{1,3}/\n'


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    s = MaskdServer()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def model_dir() -> pathlib.Path:
    return tiny_model.hf_model_dir()


@pytest.fixture(scope="module")
def backend(server: Any, model_dir: pathlib.Path) -> Iterator[MaskdBackend]:
    # What vLLM hands a backend: its config (unused by maskd's), its tokenizer, the
    # model's logits width.
    b = MaskdBackend(None, tokenizer=get_tokenizer(str(model_dir)), vocab_size=WIDTH,
                     addr=server.addr, spec_tokens=4)  # as with 4 draft tokens a step
    yield b
    b.destroy()


@pytest.fixture(scope="module")
def client(server: Any) -> Iterator[maskd.Client]:
    with maskd.Client(server.addr, timeout=60) as c:
        yield c


def replay(client: maskd.Client, g: MaskdGrammar, tokens: List[int],
           left: int = 0) -> np.ndarray:
    """maskd's stateless mask after ``tokens`` from the start, as vLLM's int32 words."""
    r = client.mask(g.index_id, tokens, words_per_row=(WIDTH + 31) // 32, max_tokens_left=left)
    return np.asarray(r.mask).view(np.int32)


def row(b: MaskdBackend, g: MaskdGrammar, bitmask: Any, idx: int = 0) -> np.ndarray:
    bitmask[idx].fill_(-1)
    g.fill_bitmask(bitmask, idx)
    return bitmask[idx].numpy().copy()


def allowed(words: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(words.view(np.uint8), bitorder="little"))


def walk(b: MaskdBackend, client: maskd.Client, g: MaskdGrammar, rng: random.Random,
         steps: int, bitmask: Any, budget: Optional[int] = None) -> List[int]:
    """Samples allowed tokens like vLLM (fill, then accept), checking each row against the
    replay; returns the tokens accepted."""
    toks: List[int] = []
    for _ in range(steps):
        if g.is_terminated():
            break
        got = row(b, g, bitmask)
        left = max(1, budget - len(toks)) if budget else 0
        assert np.array_equal(got, replay(client, g, toks, left)), f"row after {toks}"
        ids = allowed(got)
        assert len(ids) > 0 and ids.max() < WIDTH
        t = int(rng.choice(list(ids)))
        assert g.accept_tokens("r", [t])
        toks.append(t)
    return toks


def test_every_request_type_compiles_and_masks(backend: MaskdBackend, client: maskd.Client) -> None:
    bitmask = backend.allocate_token_bitmask(2)
    assert bitmask.shape == (2, (WIDTH + 31) // 32) and str(bitmask.dtype) == "torch.int32"
    specs = [
        (Opt.REGEX, REGEX),
        (Opt.JSON, json.dumps(SCHEMA)),
        (Opt.JSON_OBJECT, ""),
        (Opt.CHOICE, json.dumps(["yes", "no", "a.b"])),
        (Opt.GRAMMAR, LARK),
        (Opt.GRAMMAR, 'root ::= "x" ("," "x")*'),                   # XGrammar EBNF
        (Opt.GRAMMAR, 'root ::= "<" . ">"'),                        # GBNF (EBNF refuses '.')
        (Opt.STRUCTURAL_TAG, json.dumps({                           # vLLM's legacy form
            "type": "structural_tag", "triggers": ["<fn="],
            "structures": [{"begin": "<fn=f>", "schema": {"type": "integer"}, "end": "</fn>"}]})),
    ]
    for kind, spec in specs:
        g = backend.compile_grammar(kind, spec, stop_token_ids=set(EOS))
        got = row(backend, g, bitmask)
        assert np.array_equal(got, replay(client, g, [])), kind
        assert len(allowed(got)) > 0, kind


def test_choice_walks_to_a_choice(backend: MaskdBackend, client: maskd.Client) -> None:
    bitmask = backend.allocate_token_bitmask(1)
    tok = backend.tokenizer
    for seed in range(5):
        g = backend.compile_grammar(Opt.CHOICE, json.dumps(["yes", "no", "a.b"]),
                                    stop_token_ids=set(EOS))
        toks = walk(backend, client, g, random.Random(seed), 20, bitmask)
        assert g.is_terminated() and toks[-1] in EOS
        assert tok.decode(toks[:-1]) in ("yes", "no", "a.b")


def test_rows_equal_replay_with_budget(backend: MaskdBackend, client: maskd.Client) -> None:
    bitmask = backend.allocate_token_bitmask(1)
    for seed in range(3):
        g = backend.compile_grammar(Opt.JSON, json.dumps(SCHEMA), stop_token_ids=set(EOS),
                                    max_tokens=40)
        toks = walk(backend, client, g, random.Random(seed), 40, bitmask, budget=40)
        # Budget mode: the output closes (EOS) within max_tokens.
        assert g.is_terminated() and len(toks) <= 40
        json.loads(backend.tokenizer.decode(toks[:-1]))


def test_one_step_call_per_engine_step(backend: MaskdBackend, client: maskd.Client) -> None:
    """Many requests, accept then fill as vLLM's scheduler does: one Step call per step."""
    rng = random.Random(7)
    gs = [backend.compile_grammar(Opt.REGEX, REGEX, stop_token_ids=set(EOS)) for _ in range(6)]
    gs += [backend.compile_grammar(Opt.GRAMMAR, LARK, stop_token_ids=set(EOS)) for _ in range(6)]
    bitmask = backend.allocate_token_bitmask(len(gs))
    hist: List[List[int]] = [[] for _ in gs]
    for _ in range(8):
        before = (backend.steps, backend.solo_steps)
        for i, g in enumerate(gs):
            bitmask[i].fill_(-1)
            g.fill_bitmask(bitmask, i)
        assert backend.solo_steps == before[1] and backend.steps - before[0] <= 1
        rows = bitmask.numpy()
        for i, g in enumerate(gs):
            if g.is_terminated():
                continue
            assert np.array_equal(rows[i], replay(client, g, hist[i]))
            t = int(rng.choice(list(allowed(rows[i]))))
            assert g.accept_tokens(str(i), [t])
            hist[i].append(t)


def test_prefetch_then_fill_or_change(backend: MaskdBackend, client: maskd.Client) -> None:
    """prefetch() (the plugin calls it when the scheduler has accepted a step's tokens) sends
    the step's one Step early; fills collect it. A request changed after the prefetch
    (rollback, more tokens) collects first, then gets its own exact mask."""
    rng = random.Random(11)
    gs = [backend.compile_grammar(Opt.JSON, json.dumps(SCHEMA), stop_token_ids=set(EOS),
                                  max_tokens=60) for _ in range(5)]
    bitmask = backend.allocate_token_bitmask(len(gs))
    hist: List[List[int]] = [[] for _ in gs]
    for step in range(12):
        sent = backend.prefetched
        backend.prefetch()
        assert backend.prefetched == sent + (step > 0)
        if step % 3 == 2:  # a draft-like change after the prefetch: one token and back
            g, h = gs[step % len(gs)], hist[step % len(gs)]
            bitmask[0].fill_(-1)
            g.fill_bitmask(bitmask, 0)
            t = int(rng.choice(list(allowed(bitmask[0].numpy()))))
            assert g.accept_tokens("d", [t])
            g.fill_bitmask(bitmask, 0)
            assert np.array_equal(bitmask[0].numpy(), replay(client, g, h + [t], 60 - len(h) - 1))
            g.rollback(1)
        for i, g in enumerate(gs):
            bitmask[i].fill_(-1)
            g.fill_bitmask(bitmask, i)
        rows = bitmask.numpy()
        for i, g in enumerate(gs):
            assert np.array_equal(rows[i], replay(client, g, hist[i], 60 - len(hist[i])))
            t = int(rng.choice(list(allowed(rows[i]))))
            if t in EOS:
                continue  # keep every request going
            assert g.accept_tokens(str(i), [t])
            hist[i].append(t)


def test_reject_leaves_state(backend: MaskdBackend, client: maskd.Client) -> None:
    bitmask = backend.allocate_token_bitmask(1)
    g = backend.compile_grammar(Opt.REGEX, "[0-9]+", stop_token_ids=set(EOS))
    bad = backend.tokenizer.encode("abc", add_special_tokens=False)[0]
    assert not g.accept_tokens("r", [bad])
    assert np.array_equal(row(backend, g, bitmask), replay(client, g, []))
    assert g.validate_tokens([bad]) == []
    # A padding id (past the tokenizer, inside the logits width) is never allowed.
    assert not g.accept_tokens("r", [WIDTH - 1])


def test_lost_session_ends_only_its_request(backend: MaskdBackend, client: maskd.Client) -> None:
    """A session maskd no longer has (expired, server restarted): its row allows only the
    stop tokens and its next accept fails (vLLM then finishes it with an error); the other
    requests of the same Step are unaffected."""
    bitmask = backend.allocate_token_bitmask(2)
    lost = backend.compile_grammar(Opt.REGEX, "[0-9]+", stop_token_ids=set(EOS))
    other = backend.compile_grammar(Opt.REGEX, "[0-9]+", stop_token_ids=set(EOS))
    digit = backend.tokenizer.encode("7", add_special_tokens=False)[0]
    for g in (lost, other):
        g.fill_bitmask(bitmask, 0)
        assert g.accept_tokens("r", [digit])
    client.close_session(lost.sid)
    got = row(backend, lost, bitmask, 0)
    assert allowed(got).tolist() == sorted(EOS)
    assert np.array_equal(row(backend, other, bitmask, 1), replay(client, other, [digit]))
    assert not lost.accept_tokens("r", [EOS[0]])


def test_speculative_validate_and_rollback_are_exact(backend: MaskdBackend,
                                                     client: maskd.Client) -> None:
    bitmask = backend.allocate_token_bitmask(8)
    for seed in range(4):
        rng = random.Random(100 + seed)
        ref = backend.compile_grammar(Opt.JSON, json.dumps(SCHEMA), stop_token_ids=set(EOS))
        path = walk(backend, client, ref, rng, 60, bitmask)  # a valid sequence, EOS last
        g = backend.compile_grammar(Opt.JSON, json.dumps(SCHEMA), stop_token_ids=set(EOS))
        pos = 0
        while pos < len(path):
            k = rng.randint(1, 4)
            draft = path[pos:pos + k]
            if rng.random() < 0.4 and len(draft) > 1:  # a wrong draft token somewhere
                j = rng.randrange(1, len(draft))
                wrong = [t for t in allowed(row(backend, g, bitmask)).tolist()
                         if t not in (draft[0],)]
                draft = draft[:j] + [int(rng.choice(wrong[:50] or [WIDTH - 1]))] + draft[j + 1:]
            ok = g.validate_tokens(draft)
            # The exact valid prefix: each token allowed by the replayed mask before it.
            want: List[int] = []
            for t in draft:
                m = replay(client, g, path[:pos] + want)
                if not (m.view(np.uint32)[t >> 5] >> np.uint32(t & 31)) & np.uint32(1):
                    break
                want.append(t)
                if t in EOS:
                    break
            assert ok == want, (pos, draft)
            # vLLM's bitmask loop over the drafts: fill, accept, ..., bonus fill, rollback.
            solo = backend.solo_steps
            for i, t in enumerate(ok):
                assert np.array_equal(row(backend, g, bitmask, i),
                                      replay(client, g, path[:pos] + ok[:i]))
                assert g.accept_tokens("r", [t])
            if not g.is_terminated():
                assert np.array_equal(row(backend, g, bitmask, len(ok)),
                                      replay(client, g, path[:pos] + ok))
            g.rollback(len(ok))
            assert backend.solo_steps == solo  # the drafts' masks came from validate_tokens
            assert not g.is_terminated()
            assert np.array_equal(row(backend, g, bitmask), replay(client, g, path[:pos]))
            # The scheduler then accepts the drafts the model kept plus its own next token
            # (here: the drafts that agree with the path, and the path's next token).
            n_keep = 0
            for t, p in zip(ok, path[pos:]):
                if t != p:
                    break
                n_keep += 1
            step = path[pos:pos + n_keep + 1]
            assert g.accept_tokens("r", step)
            pos += len(step)
        assert g.is_terminated()
        # Rollback across the end: the EOS undone, the mask is the one before it.
        g.rollback(1)
        assert not g.is_terminated()
        assert np.array_equal(row(backend, g, bitmask), replay(client, g, path[:-1]))
        g.reset()
        assert np.array_equal(row(backend, g, bitmask), replay(client, g, []))


# -- end to end through vllm.LLM: docs/engines.md's example --------------------------------

def docs_example() -> str:
    """The ```python block of docs/engines.md's "## vLLM" section."""
    text = (REPO / "docs" / "engines.md").read_text()
    section = text.split("\n## vLLM\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


def test_docs_example(model_dir: pathlib.Path) -> None:
    """docs/engines.md's example, as users run it: a fresh interpreter whose environment has
    MASKD_VLLM_ADDR (vLLM's engine core in its own process, as by default), the plugin found
    through the installed maskd package's entry point. It checks every output with regex,
    jsonschema and lark, and that each finished ("stop") within max_tokens."""
    from importlib.metadata import entry_points
    assert any(ep.value == "maskd.integrations._vllm_plugin:register"
               for ep in entry_points(group="vllm.general_plugins")), \
        "the maskd package is not installed in this venv (scripts/engine_venv.sh installs it)"
    fresh = MaskdServer()  # its tokenizers tell whether maskd, not a builtin, served vLLM
    try:
        env = dict(os.environ, MASKD_VLLM_ADDR=fresh.addr, MODEL=str(model_dir),
                   VLLM_CPU_KVCACHE_SPACE="1")
        r = subprocess.run([sys.executable, "-c", docs_example()], env=env, cwd=REPO,
                           capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-6000:]
        printed = [line for line in r.stdout.splitlines()
                   if line.split(" ", 1)[0] in ("regex", "json", "grammar")]
        assert len(printed) == 12, r.stdout[-3000:]
        with maskd.Client(fresh.addr, timeout=60) as c:
            names = [t.name for t in c.list_tokenizers()]
        assert any(n.startswith("vllm-") for n in names), names
    finally:
        fresh.stop()


def test_llm_speculative_ngram(server: Any, model_dir: pathlib.Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """vLLM's n-gram speculative decoding (3 drafts a step; the prompt repeats what the
    constraints allow, so drafts come and many are valid): vLLM validates the drafts, fills a
    row per draft and rolls back through maskd, and every output is still valid."""
    import jsonschema
    import regex
    monkeypatch.setenv("MASKD_VLLM_ADDR", server.addr)
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # to reach the backend's counters
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM, SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    llm = LLM(model=str(model_dir), enforce_eager=True, max_model_len=256, seed=0,
              speculative_config={"method": "ngram", "num_speculative_tokens": 3,
                                  "prompt_lookup_max": 3, "prompt_lookup_min": 1})
    rx = r"(ab|ba|abab){1,12}"
    schema = {"type": "object", "required": ["a"], "additionalProperties": False,
              "properties": {"a": {"type": "array", "maxItems": 12,
                                   "items": {"type": "integer", "minimum": 0, "maximum": 9}}}}
    params = [SamplingParams(temperature=1.0, seed=s, max_tokens=60,
                             structured_outputs=StructuredOutputsParams(regex=rx))
              for s in range(4)]
    params += [SamplingParams(temperature=1.0, seed=s, max_tokens=60,
                              structured_outputs=StructuredOutputsParams(json=schema))
               for s in range(4)]
    outs = llm.generate(['ab ab ab ab ab ab {"a": [1, 1, 1, 1, 1]}'] * len(params), params)
    for i, o in enumerate(outs):
        text = o.outputs[0].text
        assert o.outputs[0].finish_reason == "stop", text
        if i < 4:
            assert regex.fullmatch(rx, text), text
        else:
            jsonschema.validate(json.loads(text), schema)
    b = llm.llm_engine.engine_core.engine_core.structured_output_manager.backend
    assert isinstance(b, MaskdBackend) and b.spec_tokens == 3
    assert b.solo_steps > 0  # validate_tokens ran on drafts
