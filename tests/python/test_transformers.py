"""maskd.integrations.transformers end to end: a random-weight LlamaForCausalLM with the
bundled Qwen3 tokenizer, model.generate with MaskdLogitsProcessor, every output checked
by an independent matcher."""
from __future__ import annotations

import pytest

import maskd
from conftest import need
from models import EOS, PROMPTS, check_output, constraint, hf_tokenizer, llama

torch = need("torch")
need("transformers")
from maskd.integrations.transformers import MaskdLogitsProcessor  # noqa: E402

KINDS = ["regex", "schema", "choices"]


@pytest.fixture(scope="module")
def model():
    return llama()


@pytest.fixture(scope="module")
def tok(qwen3_dir):
    return hf_tokenizer(qwen3_dir)


def _rows(tok, out, prompt_len):
    """Generated ids per row, up to and including the first EOS (None if no EOS)."""
    rows = []
    for ids in out[:, prompt_len:].tolist():
        end = next((i for i, t in enumerate(ids) if t in EOS), None)
        rows.append((ids if end is None else ids[: end + 1], end is not None))
    return rows


def _generate(model, tok, proc, *, do_sample, n=1, max_new_tokens=120, prefetch=True):
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    kw = dict(stopping_criteria=[proc.prefetch]) if prefetch else {}
    with torch.no_grad():
        out = model.generate(**enc, logits_processor=[proc], do_sample=do_sample,
                             num_return_sequences=n, max_new_tokens=max_new_tokens,
                             top_k=0 if do_sample else None, top_p=None, temperature=None,
                             pad_token_id=tok.pad_token_id, eos_token_id=EOS, **kw)
    return _rows(tok, out, enc["input_ids"].shape[1])


@pytest.mark.parametrize("kind", KINDS)
def test_generate_20_seeded_outputs_match(addr, model, tok, kind):
    proc = MaskdLogitsProcessor(addr, "qwen3", **constraint(kind))
    outputs = []
    for seed in range(2):  # sampling: 2 prompts (left padded) x 5 return sequences x 2 seeds
        torch.manual_seed(seed)
        outputs += _generate(model, tok, proc, do_sample=True, n=5)
        assert proc.sessions.prefetched == proc.sessions.steps - 1, "the Step was not overlapped"
    outputs += _generate(model, tok, proc, do_sample=False)  # greedy, 2 rows
    proc.close()
    assert len(outputs) == 22
    for ids, ended in outputs:
        assert ended, f"no EOS within max_new_tokens: {tok.decode(ids)!r}"
        check_output(kind, tok.decode(ids, skip_special_tokens=True))
        assert max(ids) < 151669, "a padding id was sampled"


def test_without_prefetch_still_correct(addr, model, tok):
    proc = MaskdLogitsProcessor(maskd.Client(addr), "qwen3", **constraint("regex"))
    torch.manual_seed(7)
    rows = _generate(model, tok, proc, do_sample=True, n=2, prefetch=False)
    assert proc.sessions.prefetched == 0
    for ids, ended in rows:
        assert ended
        check_output("regex", tok.decode(ids, skip_special_tokens=True))
    proc.close()


def test_unconstrained_model_does_not_match(model, tok):
    """The checks can fail: without the processor the random model's output matches nothing."""
    torch.manual_seed(0)
    enc = tok(PROMPTS, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**enc, do_sample=True, max_new_tokens=12, top_k=0,
                             pad_token_id=tok.pad_token_id, eos_token_id=EOS)
    for ids, _ in _rows(tok, out, enc["input_ids"].shape[1]):
        with pytest.raises(AssertionError):
            check_output("regex", tok.decode(ids, skip_special_tokens=True))


def test_beam_search_is_refused(addr, model, tok):
    proc = MaskdLogitsProcessor(addr, "qwen3", **constraint("schema"))
    enc = tok(PROMPTS[:1], return_tensors="pt")
    with pytest.raises(maskd.MaskdError, match="beam search"):
        with torch.no_grad():
            model.generate(**enc, logits_processor=[proc], num_beams=4, do_sample=False,
                           max_new_tokens=40, pad_token_id=tok.pad_token_id, eos_token_id=EOS)
    proc.close()


def test_bad_constraint_raises_at_construction(addr):
    with pytest.raises(maskd.MaskdError) as e:
        MaskdLogitsProcessor(addr, "qwen3", regex="(unclosed")
    assert e.value.code.name == "INVALID_ARGUMENT"
    with pytest.raises(ValueError):
        MaskdLogitsProcessor(addr, "qwen3")


class _ReplaySessions:
    """Stands in for RowSessions: each step answers the next (masks, live) of a script."""

    def __init__(self, script):
        self.script, self.done = list(script), []

    def step(self, tokens):
        masks, live = self.script.pop(0)
        self.done = [False] * 1
        return maskd.StepReply([None] * len(live), masks, masks.shape[-1]), live

    def close(self):
        pass


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_reused_mask_buffers_match_apply_mask(device):
    """The processor's per-step path (buffers reused across steps) against maskd.apply_mask
    row by row: random masks, live rows coming and going, logits wider than the mask
    (padding ids), narrower, and of an odd width, batch shapes changing mid-way."""
    import numpy as np

    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(3)
    proc = MaskdLogitsProcessor("unix:///nonexistent.sock", "qwen3", index_id="stub",
                                eos_token_id=[0])  # no call reaches a server
    for rows, words, width in [(4, 3, 100), (4, 3, 96), (4, 3, 80), (6, 3, 100), (3, 5, 77)]:
        script = []
        for _ in range(6):
            live = sorted(rng.choice(rows, size=int(rng.integers(0, rows + 1)), replace=False).tolist())
            masks = rng.integers(0, 2**32, size=(len(live), words), dtype=np.uint32)
            masks[:, :1] &= rng.integers(0, 2**32, dtype=np.uint32)  # some sparse words
            script.append((masks, live))
        proc.sessions = _ReplaySessions(script)
        ids = torch.zeros((rows, 2), dtype=torch.long)
        proc._prev = ids[:, :1]
        for masks, live in list(script):
            scores = torch.randn(rows, width, device=device)
            want = scores.cpu().clone()
            for j, i in enumerate(live):
                maskd.apply_mask(want[i], masks[j])
            got = proc(ids, scores)
            assert got is scores
            assert torch.equal(got.cpu(), want), (rows, words, width, live)
            proc._prev = ids
            ids = torch.cat([ids, torch.zeros((rows, 1), dtype=torch.long)], dim=1)
