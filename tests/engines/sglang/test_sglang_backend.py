"""maskd as SGLang's grammar backend (maskd.integrations.sglang), against a real maskd and
SGLang 0.5.23's own grammar code (tests/engines/sglang/install.sh).

* the grammar objects against stateless replay (``Client.mask`` from the start of the
  index): every vocab-mask row SGLang's fill writes equals maskd's mask after the
  tokens accepted, through accept, rollback, copy, a session the server lost, budget
  mode; a disallowed token raises ValueError; jump-forward gives the forced text;
* apply_vocab_mask against a per-token reference;
* SGLang's grammar path end to end (bench/engines/engine_sglang.py: plugin loader,
  GrammarManager, SamplingBatchInfo fill/apply, the result processor's accept) with
  seeded random logits for regex, JSON Schema, EBNF and structural tags, every output
  checked by an independent matcher (regex, jsonschema, lark); the same for SGLang's
  XGrammar backend, whose regex output must be identical (same logits, same masks).

Not run: SGLang's model runner, scheduler process and HTTP server (they need
sgl_kernel, a CUDA build).
"""
from __future__ import annotations

import json
import pathlib
import random
import re
from typing import Any, List

import numpy as np
import pytest
import torch

import common
import engine_sglang
import tiny_model

import maskd
from maskd.integrations import sglang as msg
from maskd.integrations import sglang_tags

REGEX = r"[0-9]{3}-[0-9]{4}( ext\. [0-9]{1,3})?"
SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 8},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120},
                         "tags": {"type": "array", "items": {"enum": ["a", "b", "c"]},
                                  "maxItems": 3}},
          "required": ["name", "age", "tags"], "additionalProperties": False}
EBNF = 'root ::= term ("+" term)*\nterm ::= [0-9]{1,3} | "(" root ")"\n'
# The same language in Lark, for the independent check of EBNF outputs.
EBNF_AS_LARK = 'start: term ("+" term)*\nterm: /[0-9]{1,3}/ | "(" start ")"\n'
LARK = 'start: list\nlist: "[" [value ("," value)*] "]"\n?value: list | NUM\nNUM: /0|[1-9][0-9]{0,3}/\n'
TOOL_SCHEMA = {"type": "object", "properties": {"city": {"enum": ["Paris", "Oslo"]}},
               "required": ["city"], "additionalProperties": False}


@pytest.fixture(scope="module")
def sgl(maskd_addr: str) -> Any:
    """SGLang's process state with --grammar-backend maskd (engine_sglang.setup: the
    plugin loader, server args, ModelConfig, tokenizer, GrammarManager)."""
    ctx = common.E2EContext(engine="sglang", requests=[], maskd_addr=maskd_addr,
                            backend="maskd", max_tokens=32, batch=1, seed=0,
                            model_dir=tiny_model.hf_model_dir())
    model_config, tok, manager = engine_sglang.setup(ctx)
    return type("S", (), dict(ctx=ctx, model_config=model_config, tok=tok, manager=manager,
                              backend=manager.grammar_backend,
                              vocab=int(model_config.vocab_size)))


@pytest.fixture()
def client(maskd_addr: str) -> Any:
    with maskd.Client(maskd_addr, timeout=60) as c:
        yield c


def grammar(sgl: Any, kind: str, text: str) -> msg.MaskdGrammar:
    """A grammar as SGLang's GrammarManager gets one: the backend's future, then a copy."""
    value, _ = sgl.backend.get_cached_or_future_value((kind, text), False)
    g = value.result() if hasattr(value, "result") else value
    assert isinstance(g, msg.MaskdGrammar), g
    return g.copy()


def replay(client: Any, g: msg.MaskdGrammar, words: int) -> np.ndarray:
    return client.mask(g.index_id, g.tokens, words_per_row=words,
                       max_tokens_left=g.max_tokens_left()).mask.view(np.int32)


def allowed_ids(row: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))


# -- the plugin --------------------------------------------------------------------------
def test_plugin_adds_the_backend_and_the_budget_hook(sgl: Any) -> None:
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.constrained.grammar_manager import GrammarManager

    assert "maskd" in GRAMMAR_BACKEND_CHOICES
    assert GRAMMAR_BACKEND_REGISTRY["maskd"] is msg.create_backend
    assert isinstance(sgl.backend, msg.MaskdGrammarBackend)
    assert hasattr(GrammarManager._apply_request_reasoning_config, "__wrapped__")
    from sglang.srt.managers.scheduler import Scheduler
    assert hasattr(Scheduler.process_batch_result, "__wrapped__")  # the prefetch hook
    msg.register_plugin()  # idempotent
    assert GRAMMAR_BACKEND_CHOICES.count("maskd") == 1


def test_tokenizer_registered_once_under_a_digest_name(sgl: Any, client: Any) -> None:
    name = sgl.backend.tokenizer_name
    assert re.fullmatch(r"sglang-[0-9a-f]{24}", name)
    t = client.tokenizer(name)
    assert t.vocab_size == sgl.vocab and sorted(t.eos_ids) == sorted(tiny_model.EOS_IDS)
    again = msg.MaskdGrammarBackend(sgl.tok, sgl.vocab, tiny_model.EOS_IDS, client=client)
    assert again.tokenizer_name == name


# -- grammar objects against stateless replay ----------------------------------------------
@pytest.mark.parametrize("kind,text", [("regex", REGEX), ("json", json.dumps(SCHEMA)),
                                       ("ebnf", EBNF)])
def test_masks_equal_replay_through_accept_rollback_copy(sgl: Any, client: Any, kind: str,
                                                         text: str) -> None:
    rng = random.Random(7)
    rows = 3  # three grammars in one batch, at rows 0..2 of SGLang's vocab mask
    gs = [grammar(sgl, kind, text) for _ in range(rows)]
    for step in range(24):
        mask = gs[0].allocate_vocab_mask(sgl.vocab, rows + 1, "cpu")
        steps_before = sgl.backend.steps
        live = [msg.GrammarRow(row=i, grammar=g) for i, g in enumerate(gs) if not g.is_terminated()]
        if not live:
            break
        msg.MaskdGrammar.fill_vocab_mask_batched(live, mask)
        assert sgl.backend.steps - steps_before <= 1  # one Step for the whole batch
        assert (mask[rows] == -1).all()  # a row without a grammar is left unconstrained
        for e in live:
            np.testing.assert_array_equal(mask[e.row].numpy(), replay(client, e.grammar, mask.shape[1]))
        for e in live:
            g = e.grammar
            choice = int(rng.choice(allowed_ids(mask[e.row].numpy())))
            g.accept_token(choice)
            if rng.random() < 0.2 and len(g.tokens) >= 2:
                g.rollback(rng.randint(1, 2))
            if rng.random() < 0.1:
                gs[e.row] = g.copy()  # a fresh grammar at the start of the same index
                assert gs[e.row].tokens == []


def test_prefetch_sends_the_batch_early_and_fill_takes_it(sgl: Any, client: Any) -> None:
    """The plugin's hook after Scheduler.process_batch_result sends one Step for the
    rows that accepted tokens; the fill then sends none. Rollbacks and accepts while it is
    in flight are relative to the state it reaches."""
    import types
    rng = random.Random(11)
    gs = [grammar(sgl, "json", json.dumps(SCHEMA)) for _ in range(3)]
    scheduler = types.SimpleNamespace(grammar_manager=sgl.manager)
    mask = gs[0].allocate_vocab_mask(sgl.vocab, 3, "cpu")
    rows = [msg.GrammarRow(row=i, grammar=g) for i, g in enumerate(gs)]
    msg.MaskdGrammar.fill_vocab_mask_batched(rows, mask)
    for step in range(12):
        for e in rows:
            e.grammar.accept_token(int(rng.choice(allowed_ids(mask[e.row].numpy()))))
        before = sgl.backend.steps
        msg.prefetch_after_results(None, scheduler)
        assert sgl.backend.steps == before + 1
        if step % 4 == 3:  # in flight: roll a row back, or take another token on it
            g = gs[step % 3]
            if step % 8 == 3:
                g.rollback(1)
            else:
                g.accept_token(int(rng.choice(allowed_ids(replay(client, g, mask.shape[1])))))
        mask = gs[0].allocate_vocab_mask(sgl.vocab, 3, "cpu")
        msg.MaskdGrammar.fill_vocab_mask_batched(rows, mask)
        assert sgl.backend.steps <= before + 2
        for e in rows:
            np.testing.assert_array_equal(mask[e.row].numpy(), replay(client, e.grammar, mask.shape[1]))


def test_disallowed_token_raises_and_changes_nothing(sgl: Any, client: Any) -> None:
    g = grammar(sgl, "regex", REGEX)
    one = sgl.tok.encode("1", add_special_tokens=False)[0]
    dash = sgl.tok.encode("-", add_special_tokens=False)[0]
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    g.accept_token(one)
    with pytest.raises(ValueError, match="not allowed"):
        g.accept_token(dash)
    assert g.tokens == [one]
    g.fill_vocab_mask(mask, 0)
    np.testing.assert_array_equal(mask[0].numpy(), replay(client, g, mask.shape[1]))


def test_eos_terminates_and_rollback_reopens(sgl: Any, client: Any) -> None:
    g = grammar(sgl, "regex", "ab")
    ids = sgl.tok.encode("ab", add_special_tokens=False)
    for t in ids:
        g.accept_token(t)
    eos = tiny_model.EOS_IDS[0]
    g.accept_token(eos)
    assert g.is_terminated()
    g.accept_token(ids[0])  # ignored after EOS, as SGLang's XGrammar backend does
    assert g.tokens == ids + [eos]
    g.rollback(1)
    assert not g.is_terminated()
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    assert set(allowed_ids(mask[0].numpy())) == set(tiny_model.EOS_IDS)


def test_lost_session_is_recreated_and_replayed(sgl: Any, client: Any) -> None:
    g = grammar(sgl, "json", json.dumps(SCHEMA))
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    for t in sgl.tok.encode('{"name": "Al', add_special_tokens=False):
        g.fill_vocab_mask(mask, 0)
        g.accept_token(t)
    client.close_session(g.session_id)  # the server forgets it (as on --session-ttl)
    g.fill_vocab_mask(mask, 0)
    np.testing.assert_array_equal(mask[0].numpy(), replay(client, g, mask.shape[1]))
    g.finished = True  # SGLang marks the request finished: the session is closed
    assert g.session_id is None


def test_maskd_unreachable_ends_rows_with_eos(sgl: Any) -> None:
    """A failed Step does not raise in SGLang's scheduler: the rows allow only EOS."""
    g = grammar(sgl, "regex", REGEX)
    mask = g.allocate_vocab_mask(sgl.vocab, 2, "cpu")
    g.fill_vocab_mask(mask, 0)
    g.accept_token(sgl.tok.encode("1", add_special_tokens=False)[0])
    live = sgl.backend.client
    sgl.backend.client = maskd.Client("unix:///nonexistent/maskd.sock", timeout=5)
    try:
        g.fill_vocab_mask(mask, 1)
    finally:
        sgl.backend.client.close()
        sgl.backend.client = live
    assert set(allowed_ids(mask[1].numpy())) == set(tiny_model.EOS_IDS)
    assert g.error and "UNAVAILABLE" in g.error
    g.accept_token(tiny_model.EOS_IDS[0])
    assert g.is_terminated()


def test_json_object_is_any_json(sgl: Any, client: Any) -> None:
    """SGLang's json_object response format ($$ANY$$): any JSON value."""
    g = grammar(sgl, "json", "$$ANY$$")
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    for t in sgl.tok.encode('[1, {"a": null}]', add_special_tokens=False):
        g.fill_vocab_mask(mask, 0)
        g.accept_token(t)
    g.fill_vocab_mask(mask, 0)
    assert set(tiny_model.EOS_IDS) <= set(allowed_ids(mask[0].numpy()))


def test_jump_forward(sgl: Any, client: Any) -> None:
    g = grammar(sgl, "json", json.dumps(SCHEMA))
    helper = g.try_jump_forward(sgl.tok)
    assert helper is not None
    text, state = g.jump_forward_str_state(helper)
    assert text == '{"name": "'
    # SGLang appends the text and re-tokenizes the output; the grammar follows.
    new = sgl.tok.encode(text, add_special_tokens=False)
    g.jump_and_retokenize([], new, state)
    assert g.tokens == new
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    np.testing.assert_array_equal(mask[0].numpy(), replay(client, g, mask.shape[1]))
    # A retokenization that changes the last token (' "' as ' ' then '"'): rollback to
    # the common prefix, accept the rest.
    alt = new[:-1] + [sgl.tok.convert_tokens_to_ids(t) for t in ("Ġ", '"')]
    assert sgl.tok.decode(alt) == text and alt != new
    g.jump_and_retokenize(new, alt, state)
    assert g.tokens == alt
    g.fill_vocab_mask(mask, 0)
    np.testing.assert_array_equal(mask[0].numpy(), replay(client, g, mask.shape[1]))
    assert grammar(sgl, "regex", "(a|b)c").try_jump_forward(sgl.tok) is None


def test_budget_from_the_grammar_manager(sgl: Any, client: Any) -> None:
    """The plugin's hook gives the grammar the request's max_new_tokens; masks then
    carry the budget (equal to replay with max_tokens_left)."""
    req = engine_sglang.make_req(sgl.tok, sgl.model_config, "b", "x", [1],
                                 {"max_new_tokens": 9, "json_schema": json.dumps(SCHEMA)})
    sgl.manager.process_req_with_grammar(req)
    while sgl.manager.has_waiting_grammars():
        sgl.manager.get_ready_grammar_requests()
    g = req.grammar
    assert isinstance(g, msg.MaskdGrammar) and g.budget == 9
    mask = g.allocate_vocab_mask(sgl.vocab, 1, "cpu")
    g.fill_vocab_mask(mask, 0)
    np.testing.assert_array_equal(mask[0].numpy(), replay(client, g, mask.shape[1]))
    free = client.mask(g.index_id, [], words_per_row=mask.shape[1]).mask.view(np.int32)
    assert not np.array_equal(mask[0].numpy(), free)  # the budget removed tokens


def test_apply_vocab_mask_matches_a_reference(sgl: Any) -> None:
    rng = np.random.default_rng(3)
    rows, vocab = 3, sgl.vocab
    words = -(-vocab // 32)
    mask = torch.from_numpy(rng.integers(-2**31, 2**31, size=(rows, words), dtype=np.int64)
                            .astype(np.int32))
    mask[1] = -1
    logits = torch.randn(rows, vocab)
    ref = logits.clone()
    bits = np.unpackbits(mask.numpy().view(np.uint8), axis=1, bitorder="little")[:, :vocab]
    ref[torch.from_numpy(bits == 0)] = float("-inf")
    msg.MaskdGrammar.apply_vocab_mask(logits, msg.MaskdGrammar.move_vocab_mask(mask, "cpu"))
    assert torch.equal(logits, ref)
    assert torch.isfinite(logits[1]).all()


def test_ebnf_field_takes_lark_too() -> None:
    assert msg.grammar_format(EBNF) == "ebnf"
    assert msg.grammar_format(LARK) == "lark"
    assert msg.grammar_format("// c\n?start : x\nx: \"a\"") == "lark"
    assert msg.grammar_format("root::=x\nx ::= \"a\"") == "ebnf"


def test_structural_tag_formats() -> None:
    legacy = {"structures": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}],
              "triggers": ["<f"], "at_least_one": True}
    assert json.loads(sglang_tags.to_maskd(json.dumps(legacy))) == {
        "tags": [{"begin": "<f>", "schema": SCHEMA, "end": "</f>"}], "triggers": ["<f"],
        "at_least_one": True}
    new = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<t"], "stop_after_first": True,
        "tags": [{"type": "tag", "begin": "<t>", "end": "</t>",
                  "content": {"type": "regex", "pattern": "[a-z]+"}}]}}
    assert json.loads(sglang_tags.to_maskd(json.dumps(new)))["tags"] == [
        {"begin": "<t>", "regex": "[a-z]+", "end": "</t>"}]
    with pytest.raises(ValueError, match="not supported"):
        sglang_tags.to_maskd(json.dumps({"type": "structural_tag",
                                         "format": {"type": "sequence", "elements": []}}))


# -- docs/engines.md's example --------------------------------------------------------------
def test_docs_example_runs(maskd_addr: str) -> None:
    """The ```python block of docs/engines.md's "## SGLang" section, in a fresh interpreter
    (maskd at $MASKD_ADDR, the tiny model's folder as MODEL_DIR)."""
    import os
    import subprocess
    import sys
    repo = pathlib.Path(__file__).resolve().parents[3]
    text = (repo / "docs" / "engines.md").read_text()
    section = text[text.index("\n## SGLang\n"):]
    section = section[:section.index("\n## ", 5)]
    (block,) = re.findall(r"```python\n(.*?)```", section, re.S)
    env = dict(os.environ, MASKD_ADDR=maskd_addr, MODEL_DIR=str(tiny_model.hf_model_dir()))
    r = subprocess.run([sys.executable, "-c", block], env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    assert re.fullmatch(r"[0-9]{3}-[0-9]{4}", r.stdout.strip().splitlines()[-1])


# -- SGLang's grammar path end to end --------------------------------------------------------
def check_tool_text(text: str) -> None:
    """Free text, then one <tool_call>JSON</tool_call> (at_least_one, stop_after_first)."""
    import jsonschema
    m = re.fullmatch(r"(.*?)<tool_call>(.*)</tool_call>", text, re.S)
    assert m is not None, text
    assert "<tool_call>" not in m.group(1)
    jsonschema.validate(json.loads(m.group(2)), TOOL_SCHEMA)


def run_engine(sgl: Any, backend: str, requests: List[common.Request], max_tokens: int,
               seed: int) -> common.EngineResult:
    ctx = common.E2EContext(engine="sglang", requests=requests, maskd_addr=sgl.ctx.maskd_addr,
                            backend=backend, max_tokens=max_tokens, batch=len(requests),
                            seed=seed, model_dir=sgl.ctx.model_dir)
    return engine_sglang.run(ctx)


def test_driven_path_regex_json_ebnf(sgl: Any) -> None:
    import check
    import lark

    reqs = [common.Request("re", "regex", REGEX),
            common.Request("js", "json_schema", json.dumps(SCHEMA)),
            common.Request("eb", "gbnf", EBNF),
            common.Request("lk", "lark", LARK)]  # through SGLang's ebnf field
    for seed in (1, 2):
        res = run_engine(sgl, "maskd", reqs, 48, seed)
        assert len(res.samples) == 4, res.notes
        for s in res.samples:
            req = next(r for r in reqs if r.id == s.id)
            assert s.finished, s  # budget mode: closed within max_tokens
            if req.kind == "gbnf":
                lark.Lark(EBNF_AS_LARK, parser="earley").parse(s.text)
            else:
                assert check.check(req, s.text, True) is True, s
        assert any("Step RPCs" in n for n in res.notes)
    # SGLang's XGrammar backend, same logits: the regex's masks are the same, so is its
    # output (budget mode aside: no row is near its budget here).
    ours = run_engine(sgl, "maskd", reqs[:1], 48, 3)
    theirs = run_engine(sgl, "builtin", reqs[:1], 48, 3)
    assert theirs.samples[0].token_ids == ours.samples[0].token_ids
    assert check.check(reqs[0], theirs.samples[0].text, theirs.samples[0].finished)
    engine_sglang.setup(sgl.ctx)  # back to --grammar-backend maskd for the next tests


def test_driven_path_structural_tag(sgl: Any) -> None:
    tag = {"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
        "stop_after_first": True,
        "tags": [{"type": "tag", "begin": "<tool_call>", "end": "</tool_call>",
                  "content": {"type": "json_schema", "json_schema": TOOL_SCHEMA}}]}}
    legacy = {"structures": [{"begin": "<tool_call>", "schema": TOOL_SCHEMA,
                              "end": "</tool_call>"}],
              "triggers": ["<tool_call>"], "at_least_one": True}
    processor = engine_sglang.result_processor()
    reqs = [engine_sglang.make_req(sgl.tok, sgl.model_config, f"st{i}", "x", [1],
                                   {"max_new_tokens": 40, "temperature": 1.0,
                                    "structural_tag": json.dumps(t)})
            for i, t in enumerate([tag, tag, legacy])]
    for r in reqs:
        sgl.manager.process_req_with_grammar(r)
    while sgl.manager.has_waiting_grammars():
        sgl.manager.get_ready_grammar_requests()
    assert all(isinstance(r.grammar, msg.MaskdGrammar) for r in reqs)
    engine_sglang.decode(reqs, sgl.vocab, torch.Generator().manual_seed(5), True, processor, [])
    for r in reqs[:2]:  # stop_after_first: the tag, then EOS
        ids = [t for t in r.output_ids if t not in tiny_model.EOS_IDS]
        check_tool_text(sgl.tok.decode(ids, skip_special_tokens=False))
    ids = [t for t in reqs[2].output_ids if t not in tiny_model.EOS_IDS]
    text = sgl.tok.decode(ids, skip_special_tokens=False)
    assert "<tool_call>" in text  # at_least_one (legacy has no stop_after_first)
    for call in re.findall(r"<tool_call>(.*?)</tool_call>", text, re.S):
        import jsonschema
        jsonschema.validate(json.loads(call), TOOL_SCHEMA)
