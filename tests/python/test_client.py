"""maskd.Client / maskd.aio.AsyncClient against the real maskd binary: every RPC,
errors (code + message), masks as zero-copy NumPy views, apply_mask, the shm helper, the CLI."""
from __future__ import annotations

import asyncio
import json
import os
import pathlib
import subprocess
import sys

import grpc
import numpy as np
import pytest
import regex as re_mod

import maskd
import maskd.aio
from maskd.masks import allowed_tokens, apply_mask, is_allowed, unpack_mask
from maskd.shm import ShmLogits

from conftest import REPO, TOKENIZER_DIR, need
from models import LIST_LARK, int_lists

RX = "(cat|dog)s?"


@pytest.fixture(scope="module")
def cat(qwen3_dir):
    """The id of the token "cat" in the bundled Qwen3 tokenizer."""
    tokenizers = need("tokenizers")
    return tokenizers.Tokenizer.from_file(str(qwen3_dir / "tokenizer.json")).token_to_id("cat")


def test_health_ping_stats(client):
    assert client.health() == "SERVING"
    client.ping()
    st = client.stats()
    assert st.pid > 0 and st.version


def test_list_tokenizers_and_detokenize(client):
    t = client.tokenizer("qwen3")
    assert t.vocab_size == 151669 and t.words_per_row if hasattr(t, "words_per_row") else True
    assert t.eos_ids, "qwen3 has EOS ids"
    assert client.detokenize("qwen3", [9707]) == b"Hello"
    with pytest.raises(maskd.MaskdError) as e:
        client.tokenizer("nope")
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_register_tokenizer(client, qwen3_dir):
    data = (qwen3_dir / "tokenizer.json").read_bytes()
    cfg = (qwen3_dir / "tokenizer_config.json").read_bytes()
    t = client.register_tokenizer("py-qwen3", data, tokenizer_config_json=cfg, vocab_size=151936)
    assert t.vocab_size == 151936 and t.source == "registered"
    # Same content again: a no-op; other content under the name: ALREADY_EXISTS.
    assert client.register_tokenizer("py-qwen3", data, tokenizer_config_json=cfg,
                                     vocab_size=151936).content_hash == t.content_hash
    with pytest.raises(maskd.MaskdError) as e:
        client.register_tokenizer("py-qwen3", data, vocab_size=151937)
    assert e.value.code == grpc.StatusCode.ALREADY_EXISTS


def test_compile_errors_carry_code_and_message(client):
    r = client.compile("qwen3", regex=RX)
    assert r.index_id.startswith("ix-") and r.state == 2 and r.words_per_row == (151669 + 31) // 32
    assert client.get_index(r.index_id).state == 2
    assert client.cancel_compile(r.index_id) is False  # already finished
    with pytest.raises(maskd.MaskdError) as e:
        client.compile("qwen3", regex="(ab")
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "offset" in e.value.message or "(" in e.value.message
    with pytest.raises(maskd.MaskdError) as e:
        client.compile("no-such-tokenizer", regex=RX)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(maskd.MaskdError) as e:
        client.get_index("ix-" + "0" * 32)
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    schema = json.dumps({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    assert client.compile("qwen3", json_schema=schema).state == 2
    with pytest.raises(ValueError):
        client.compile("qwen3")


def _drive(client, step, sid, text_tokens):
    """Steps a session through tokens one by one, checking each is allowed first."""
    reply = step([(sid, [])])
    for t in text_tokens:
        assert is_allowed(reply.masks[0], t)
        reply = step([(sid, [t])]).raise_for_status()
    return reply


def test_session_step_mask_rollback_fork(client, cat):
    eos = list(client.tokenizer("qwen3").eos_ids)
    s = client.create_session(tokenizer="qwen3", regex=RX)
    assert s.session_id != 0 and s.words_per_row == 4740
    first = client.step([(s.session_id, [])]).raise_for_status()
    # Zero-copy view of the reply's bytes, read-only, uint32, one row per entry.
    assert first.masks.dtype == np.uint32 and first.masks.shape == (1, 4740)
    root = first.masks
    while isinstance(root, np.ndarray):
        root = root.base
    assert not first.masks.flags.writeable and isinstance(root, bytes)
    allowed = allowed_tokens(first.masks[0])
    texts = [client.detokenize("qwen3", [t]) for t in allowed]
    assert all(b"cats".startswith(x) or b"dogs".startswith(x) for x in texts) and allowed
    assert not any(e in allowed for e in eos)
    assert client.detokenize("qwen3", [cat]) == b"cat"
    r = client.step([(s.session_id, [cat])]).raise_for_status()
    assert r.results[0].accepting and r.results[0].num_tokens == 1
    assert all(is_allowed(r.masks[0], e) for e in eos)
    # Stateless Mask gives the same row.
    m = client.mask(s.index_id, [cat])
    assert np.array_equal(m.mask, r.masks[0]) and m.accepting
    # Fork: same state, independent afterwards.
    f = client.fork_session(s.session_id)
    assert client.step([(f, [eos[0]])]).raise_for_status().results[0].finished
    assert not client.step([(s.session_id, [])]).results[0].finished
    # Rollback to the start: the first mask again.
    assert client.rollback(s.session_id, 1) == 0
    assert np.array_equal(client.step([s.session_id]).masks[0], first.masks[0])
    # A disallowed token fails its entry only (FAILED_PRECONDITION), state unchanged.
    bad = client.step([(s.session_id, [eos[0]]), (f, [])])
    assert bad.results[0].status.code == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    assert not bad.masks[0].any() and bad.ok(1)
    with pytest.raises(maskd.MaskdError) as e:
        bad.raise_for_status()
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and e.value.entry == 0
    with pytest.raises(maskd.MaskdError) as e:
        client.rollback(s.session_id, 5)
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
    client.close_session(f)
    client.close_session(s.session_id)
    with pytest.raises(maskd.MaskdError) as e:
        client.close_session(s.session_id)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_step_async_and_stream_match_unary(client):
    ix = client.compile("qwen3", regex="[a-z]{1,12}").index_id
    a = client.create_session(ix).session_id
    b = client.create_session(ix).session_id
    toks = [client.mask(ix).mask]
    fut = client.step_async([(a, []), (b, [])], words_per_row=4800)
    r = fut.result()
    assert r.masks.shape == (2, 4800) and not r.masks[:, 4740:].any()
    with client.step_stream() as st:
        st.send([(a, [])])
        st.send([(b, [])])  # two in flight, replies in order
        r1, r2 = st.recv(), st.recv()
        assert np.array_equal(r1.masks[0], toks[0]) and np.array_equal(r2.masks[0], toks[0])
        t = allowed_tokens(r1.masks[0])[0]
        r3 = st.step([(a, [t])]).raise_for_status()
        assert np.array_equal(r3.masks[0], client.mask(ix, [t]).mask)
        bad = st.step([(12345678901, [])])
        assert bad.results[0].status.code == grpc.StatusCode.NOT_FOUND.value[0]


def test_async_client_covers_the_api(addr, cat):
    async def run():
        async with maskd.aio.AsyncClient(addr, timeout=60) as c:
            assert await c.health() == "SERVING"
            await c.ping()
            assert (await c.stats()).pid > 0
            assert any(t.name == "qwen3" for t in await c.list_tokenizers())
            assert await c.detokenize("qwen3", [9707]) == b"Hello"
            ix = (await c.compile("qwen3", regex=RX)).index_id
            assert (await c.get_index(ix, wait=True)).state == 2
            assert await c.cancel_compile(ix) is False
            s = await c.create_session(ix)
            r = await c.step([(s.session_id, [cat])])
            r.raise_for_status()
            assert np.array_equal(r.masks[0], (await c.mask(ix, [cat])).mask)
            f = await c.fork_session(s.session_id)
            assert await c.rollback(f, 1) == 0
            st = c.step_stream()
            r2 = await st.step([(f, [])])
            assert np.array_equal(r2.masks[0], (await c.mask(ix)).mask)
            await st.close()
            await c.close_session(f)
            await c.close_session(s.session_id)
            with pytest.raises(maskd.MaskdError) as e:
                await c.close_session(s.session_id)
            assert e.value.code == grpc.StatusCode.NOT_FOUND
            with pytest.raises(maskd.MaskdError) as e:
                await c.compile("qwen3", regex="a{5,2}")
            assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
            with pytest.raises(maskd.MaskdError) as e:  # the SharedMemory service, async
                await c.shm.list_regions("no-such-region")
            assert e.value.code == grpc.StatusCode.NOT_FOUND

    asyncio.run(run())


def _expected(logits, allowed_bits):
    want = logits.copy()
    want[..., ~allowed_bits] = -np.inf
    return want


def test_apply_mask_numpy_pads_wider_logits(client):
    ix = client.compile("qwen3", regex=RX).index_id
    row = client.mask(ix).mask
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((2, 151936)).astype(np.float32)  # wider than the 151669 tokens
    orig = logits.copy()
    out = apply_mask(logits, np.stack([row, row]))
    assert out is logits
    bits = unpack_mask(row, 151936)
    assert not bits[151669:].any()
    np.testing.assert_array_equal(logits, _expected(orig, bits))
    assert np.isfinite(logits[:, bits]).all() and np.isneginf(logits[:, 151680:]).all()
    # One row broadcasts; 1-D logits.
    one = orig[0].copy()
    apply_mask(one, row)
    np.testing.assert_array_equal(one, _expected(orig[0], bits))
    with pytest.raises(TypeError):
        apply_mask([1.0, 2.0], row)


def test_apply_mask_torch_and_mlx(client):
    ix = client.compile("qwen3", regex=RX).index_id
    row = client.mask(ix).mask
    bits = unpack_mask(row, 151936)
    base = np.random.default_rng(1).standard_normal((1, 151936)).astype(np.float32)
    torch = need("torch")
    t = torch.from_numpy(base.copy())
    assert apply_mask(t, row[None]) is t
    np.testing.assert_array_equal(t.numpy(), _expected(base, bits))
    mx = need("mlx.core")
    m = apply_mask(mx.array(base), row[None])
    np.testing.assert_array_equal(np.array(m), _expected(base, bits))


def test_shm_logits_applied_in_place(client, cat):
    ix = client.compile("qwen3", regex=RX).index_id
    sids = [client.create_session(ix).session_id for _ in range(3)]
    base = np.random.default_rng(2).standard_normal((3, 151936)).astype(np.float32)
    with ShmLogits.from_array(client, base) as region:
        assert [r.name for r in client.shm.list_regions(region.region)] == [region.region]
        resp = region.step([(sids[0], []), (sids[1], [cat]), (sids[2], [])], row_map=[0, 1, -1])
        assert resp.words_per_row == 4740
        want0 = _expected(base[0], unpack_mask(client.mask(ix).mask, 151936))
        want1 = _expected(base[1], unpack_mask(client.mask(ix, [cat]).mask, 151936))
        np.testing.assert_array_equal(region.array[0], want0)
        np.testing.assert_array_equal(region.array[1], want1)
        np.testing.assert_array_equal(region.array[2], base[2])  # row_map -1: untouched
        # A bad entry raises; its row is left untouched.
        region.array[...] = base
        with pytest.raises(maskd.MaskdError) as e:
            region.step([(sids[0], [151643])])
        assert e.value.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT)
        np.testing.assert_array_equal(region.array[0], base[0])
        torch = need("torch")
        tview = region.tensor()
        tview.copy_(torch.from_numpy(base))
        region.step([(sids[2], [])])
        np.testing.assert_array_equal(region.array[0], want0)
        key, name = region.key, region.region
    assert not os.path.exists("/dev/shm" + key)
    with pytest.raises(maskd.MaskdError) as e:
        client.shm.list_regions(name)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_shm_refused_without_allow_shm():
    from conftest import MaskdServer

    s = MaskdServer([])
    try:
        with maskd.Client(s.addr, timeout=30) as c:
            with pytest.raises(maskd.MaskdError) as e:
                ShmLogits(c, 1, 8)
            assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION
            assert "allow_shm" in e.value.message
    finally:
        s.stop()


def _cli(addr, *args):
    return subprocess.run([sys.executable, "-m", "maskd", "--addr", addr, *args],
                          capture_output=True, text=True, timeout=120)


def test_cli_health_compile_generate(addr):
    r = _cli(addr, "health")
    assert r.returncode == 0 and json.loads(r.stdout) == {"status": "SERVING"}
    r = _cli(addr, "compile", "--tokenizer", "qwen3", "--regex", RX)
    assert r.returncode == 0 and json.loads(r.stdout)["state"] == "ready"
    pattern = "[a-z]{1,8}@[a-z]{2,5}\\.com"
    for seed in range(5):
        r = _cli(addr, "generate", "--tokenizer", "qwen3", "--regex", pattern, "--seed", str(seed),
                 "--max-tokens", "64")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        assert out["finished"] and re_mod.fullmatch(pattern, bytes.fromhex(out["text_hex"]).decode())
    r = _cli(addr, "compile", "--tokenizer", "qwen3", "--regex", "(")
    assert r.returncode == 2 and "INVALID_ARGUMENT" in r.stderr
    r = _cli("unix:///nonexistent/maskd.sock", "--timeout", "2", "health")
    assert r.returncode == 2 and r.stderr


def test_grammar_compile_session_and_errors(client):
    r = client.compile("qwen3", grammar=LIST_LARK)
    # Its terminals' DFAs are built when a walk first reaches them: none yet.
    assert r.route == "grammar" and r.dfa_states == 0
    gbnf = client.compile("qwen3", grammar=maskd.Grammar('root ::= "[" [0-9]* "]"', "gbnf"))
    assert gbnf.route == "grammar" and gbnf.index_id != r.index_id
    assert client.compile("qwen3", regex="[0-9]+").route == "regex"
    eos = set(client.tokenizer("qwen3").eos_ids)
    finished = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        sid = client.create_session(r.index_id).session_id
        tokens, reply = [], client.step([(sid, [])])
        for step in range(60):
            allowed = allowed_tokens(reply.masks[0])
            assert len(allowed) > 0
            ends = [int(t) for t in allowed if int(t) in eos]
            t = ends[0] if ends and step >= 15 else int(allowed[rng.integers(len(allowed))])
            reply = client.step([(sid, [t])])
            assert reply.results[0].status.code == 0
            if t in eos:
                assert reply.results[0].finished
                text = client.detokenize("qwen3", tokens).decode()
                assert int_lists(json.loads(text)), text
                finished += 1
                break
            tokens.append(t)
        client.close_session(sid)
    assert finished >= 3
    assert client.get_index(r.index_id).dfa_states > 0  # the terminals the walks reached
    with pytest.raises(ValueError, match="expected lark, gbnf or ebnf"):
        client.compile("qwen3", grammar=maskd.Grammar("root ::= \"a\"", "yaml"))
    with pytest.raises(maskd.MaskdError) as e:
        client.compile("qwen3", grammar=maskd.Grammar("root ::= [z-a]", "gbnf"))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "line 1, column" in str(e.value)
    # A token budget on a grammar: "[" needs "]", so the start is 2 bytes from an end; a
    # sequence that follows the budget masks ends with EOS within the budget, and each
    # budget mask is a non-empty subset of the plain one.
    for seed in range(4):
        rng = np.random.default_rng(100 + seed)
        sid = client.create_session(r.index_id).session_id
        budget, tokens = 6, []
        reply = client.step([(sid, [], 0, budget)])
        assert reply.results[0].status.code == 0 and reply.results[0].min_bytes_to_finish == 2
        while True:
            left = budget - len(tokens)
            assert left >= 1
            plain = client.mask(r.index_id, tokens).mask
            allowed = allowed_tokens(reply.masks[0])
            assert len(allowed) > 0 and set(allowed) <= set(allowed_tokens(plain))
            t = int(allowed[rng.integers(len(allowed))])
            reply = client.step([(sid, [t], 0, left - 1 if left > 1 else 0)])
            assert reply.results[0].status.code == 0
            if t in eos:
                break
            tokens.append(t)
        assert json.loads(client.detokenize("qwen3", tokens).decode()) is not None
        assert len(tokens) + 1 <= budget
        client.close_session(sid)


TOOL_TAG = {"tags": [{"begin": "<tool_call>", "end": "</tool_call>",
                     "schema": {"type": "object",
                                "properties": {"name": {"enum": ["get_time"]},
                                               "arguments": {"type": "object", "properties": {},
                                                             "additionalProperties": False}},
                                "required": ["name", "arguments"],
                                "additionalProperties": False}}],
            "at_least_one": True, "stop_after_first": True}


TREE_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"},
                                                "children": {"type": "array", "items": {"$ref": "#"}}},
               "required": ["name", "children"], "additionalProperties": False}


def _depth(tree: dict) -> int:
    return 1 + max((_depth(c) for c in tree["children"]), default=0)


def test_eager_dfa_builds_the_whole_dfa_at_compile(client):
    rx = "[ab]*a[ab]{11}"  # 4,096 minimized states: over --eager-dfa-states, so lazy by default
    lazy = client.compile("qwen3", regex=rx)
    whole = client.compile("qwen3", regex=rx, eager_dfa=True)
    assert lazy.index_id != whole.index_id  # part of the cache key
    assert lazy.dfa_states < 1024
    assert whole.dfa_states >= 4096


def test_schema_routes(client):
    auto = client.compile("qwen3", json_schema=TREE_SCHEMA)
    assert auto.route == "grammar"  # recursive: exact on the grammar route
    assert client.compile("qwen3", json_schema=TREE_SCHEMA, schema_route="regex").route == "regex"
    assert client.compile("qwen3", json_schema={"type": "integer"}).route == "regex"
    assert client.compile("qwen3", json_schema={"type": "integer"},
                          schema_route="grammar").route == "grammar"
    person = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
              "required": ["a", "b"], "additionalProperties": False}
    assert client.compile("qwen3", json_schema=person).route == "regex"
    assert client.compile("qwen3", json_schema=person, any_property_order=True).route == "grammar"
    with pytest.raises(ValueError, match="schema_route"):
        client.compile("qwen3", json_schema=TREE_SCHEMA, schema_route="fast")
    # A tree deeper than the regex route's recursion depth (3), spelled one
    # byte token at a time: every byte allowed, EOS allowed at the end.
    tree: dict = {"name": "leaf", "children": []}
    for i in range(5):
        tree = {"name": f"n{i}", "children": [tree]}
    assert _depth(tree) == 6
    text = json.dumps(tree).encode()
    vocab = client.tokenizer("qwen3")
    byte_token = {}
    for t in range(256 * 4):
        b = client.detokenize("qwen3", [t])
        if len(b) == 1 and b[0] not in byte_token:
            byte_token[b[0]] = t
    sid = client.create_session(auto.index_id).session_id
    reply = client.step([(sid, [])])
    for byte in text:
        t = byte_token[byte]
        assert t in set(int(x) for x in allowed_tokens(reply.masks[0])), (text, byte)
        reply = client.step([(sid, [t])])
        assert reply.results[0].status.code == 0
    assert reply.results[0].accepting
    assert set(vocab.eos_ids) & set(int(x) for x in allowed_tokens(reply.masks[0]))
    client.close_session(sid)


def test_structural_tag_tool_call(client, qwen3_dir):
    tokenizers = need("tokenizers")
    tok = tokenizers.Tokenizer.from_file(str(qwen3_dir / "tokenizer.json"))
    r = client.compile("qwen3", structural_tag=TOOL_TAG)
    assert r.route == "grammar"
    eos = set(client.tokenizer("qwen3").eos_ids)
    # Free text then the trigger, as the model would write them: every token allowed.
    prefix = tok.encode("Let me check the time.\n<tool_call>", add_special_tokens=False).ids
    sid = client.create_session(r.index_id).session_id
    reply = client.step([(sid, [])])
    for t in prefix:
        assert is_allowed(reply.masks[0], t), t
        reply = client.step([(sid, [t])]).raise_for_status()
    # Then anything the masks allow, until EOS: one valid call, nothing after it.
    tokens = list(prefix)
    rng = np.random.default_rng(4)
    for _ in range(80):
        allowed = [int(t) for t in allowed_tokens(reply.masks[0])]
        ends = [t for t in allowed if t in eos]
        t = ends[0] if ends else allowed[rng.integers(len(allowed))]
        reply = client.step([(sid, [t])]).raise_for_status()
        if t in eos:
            break
        tokens.append(t)
    assert reply.results[0].finished
    out = client.detokenize("qwen3", tokens).decode()
    free, _, rest = out.partition("<tool_call>")
    assert free == "Let me check the time.\n" and rest.endswith("</tool_call>"), out
    assert json.loads(rest[:-len("</tool_call>")]) == {"name": "get_time", "arguments": {}}
    client.close_session(sid)
    with pytest.raises(maskd.MaskdError) as e:
        client.compile("qwen3", structural_tag={"tags": [{"begin": "<a>"}]})
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "tags[0]" in str(e.value)


def test_cli_generate_closes_within_its_budget(addr):
    """The README's demo: a JSON grammar generated at random closes within --max-tokens
    (budget mode, on by default) in both command lines; --no-budget cuts it."""
    grammar = str(REPO / "tests" / "data" / "grammars" / "json.gbnf")
    maskctl = pathlib.Path(os.environ.get("MASKD_BIN", REPO / "build" / "bin" / "maskd")).parent / "maskctl"
    clis = [lambda *a: _cli(addr, *a)]
    if maskctl.exists():
        clis.append(lambda *a: subprocess.run([str(maskctl), "--addr", addr, *a],
                                              capture_output=True, text=True, timeout=120))
    for cli in clis:
        for seed in range(4):
            args = ("generate", "--tokenizer", "qwen3", "--grammar", grammar, "--seed", str(seed))
            r = cli(*args, "--max-tokens", "24")
            assert r.returncode == 0, r.stderr
            out = json.loads(r.stdout)
            assert out["finished"] and len(out["tokens"]) <= 24, out
            text = bytes.fromhex(out["text_hex"]).decode()
            assert out["text"] == text
            json.loads(text)  # a complete JSON value
        cut = json.loads(cli(*args, "--no-budget", "--max-tokens", "4").stdout)
        assert not cut["finished"] and len(cut["tokens"]) == 4


def test_cli_grammar_compile_generate(addr, tmp_path):
    path = tmp_path / "lists.lark"
    path.write_text(LIST_LARK)
    r = _cli(addr, "compile", "--tokenizer", "qwen3", "--grammar", str(path))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["route"] == "grammar"
    done = 0
    for seed in range(8):
        r = _cli(addr, "generate", "--tokenizer", "qwen3", "--grammar", str(path), "--seed",
                 str(seed), "--max-tokens", "40")
        assert r.returncode == 0, r.stderr
        out = json.loads(r.stdout)
        if out["finished"]:
            assert int_lists(json.loads(bytes.fromhex(out["text_hex"]).decode()))
            done += 1
    assert done >= 1
    maskctl = REPO / "build" / "bin" / "maskctl"
    if maskctl.exists():
        r = subprocess.run([str(maskctl), "--addr", addr, "compile", "--tokenizer", "qwen3",
                            "--grammar", str(path)], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["route"] == "grammar"
    bad = tmp_path / "bad.txt"
    bad.write_text("root ::= \"a\"\n")
    r = _cli(addr, "compile", "--tokenizer", "qwen3", "--grammar", str(bad))
    assert r.returncode != 0 and "--format" in r.stderr


def test_generated_code_is_current():
    need("grpc_tools")
    need("mypy_protobuf")  # its protoc plugins write the .pyi stubs
    r = subprocess.run([sys.executable, str(REPO / "client" / "python" / "gen_proto.py"), "--check"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_version_is_written_once():
    # maskd/_version.py holds it; the build reads it from there (pyproject.toml's dynamic
    # version), so the installed metadata says the same.
    from importlib import metadata

    text = (REPO / "client" / "python" / "pyproject.toml").read_text()
    assert not re_mod.search(r'(?m)^version = "', text), "the version is written in pyproject.toml"
    assert maskd.__version__ == metadata.version("maskd")


def test_health_status_names():
    from grpc_health.v1 import health_pb2

    from maskd._common import serving_status_name

    assert serving_status_name(health_pb2.HealthCheckResponse.SERVING) == "SERVING"
    assert serving_status_name(health_pb2.HealthCheckResponse.NOT_SERVING) == "NOT_SERVING"
    assert serving_status_name(health_pb2.HealthCheckResponse.SERVICE_UNKNOWN) == "SERVICE_UNKNOWN"
    assert serving_status_name(99) == "UNKNOWN"  # a status this version does not know
