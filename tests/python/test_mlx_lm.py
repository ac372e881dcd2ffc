"""maskd.integrations.mlx_lm end to end: mlx-lm's llama Model with random weights and the
bundled Qwen3 tokenizer, through stream_generate and batch_generate (ragged rows)."""
from __future__ import annotations

import pytest

from conftest import need
from models import EOS, PROMPTS, check_output, constraint, mlx_llama, mlx_tokenizer

mx = need("mlx.core")
mlx_lm = need("mlx_lm")
from mlx_lm.sample_utils import make_sampler  # noqa: E402

from maskd.integrations.mlx_lm import MaskdLogitsProcessor  # noqa: E402

KINDS = ["regex", "schema", "choices"]
MAX_TOKENS = 120


@pytest.fixture(scope="module")
def model():
    return mlx_llama()


@pytest.fixture(scope="module")
def tok(qwen3_dir):
    return mlx_tokenizer(qwen3_dir)


def _stream(model, tok, proc, prompt, sampler):
    ids, reason = [], None
    for r in mlx_lm.stream_generate(model, tok, prompt, max_tokens=MAX_TOKENS, sampler=sampler,
                                    logits_processors=[proc]):
        ids.append(r.token)
        reason = r.finish_reason
    return ids, reason


@pytest.mark.parametrize("kind", KINDS)
def test_stream_and_batch_generate_match(addr, model, tok, kind):
    proc = MaskdLogitsProcessor(addr, "qwen3", **constraint(kind))
    outputs = []
    for seed in range(10):  # 10 sampled single-row generations, 2 greedy
        mx.random.seed(seed)
        outputs.append(_stream(model, tok, proc, PROMPTS[seed % 2], make_sampler(temp=1.0)))
    for p in PROMPTS:
        outputs.append(_stream(model, tok, proc, p, make_sampler(temp=0.0)))
    for ids, reason in outputs:
        assert reason == "stop" and ids[-1] in EOS, f"no EOS: {tok.decode(ids)!r}"
        check_output(kind, tok.decode(ids[:-1]))
    assert proc.open_sessions == 0  # rows that ended closed their sessions
    # batch_generate: 8 ragged prompts (different lengths), one shared processor.
    mx.random.seed(100)
    prompts = [tok.encode(f"Q{i}. " + PROMPTS[i % 2] + " again" * (i // 2)) for i in range(8)]
    assert len({len(p) for p in prompts}) > 2
    out = mlx_lm.batch_generate(model, tok, prompts, max_tokens=MAX_TOKENS, return_token_ids=True,
                                sampler=make_sampler(temp=1.0), logits_processors=[proc])
    assert len(out.token_ids) == 8
    for ids in out.token_ids:
        text_ids = [t for t in ids if t not in EOS]
        assert len(text_ids) < len(ids) or len(ids) < MAX_TOKENS, f"no EOS: {tok.decode(ids)!r}"
        check_output(kind, tok.decode(text_ids))
    proc.close()
    assert proc.open_sessions == 0


def test_unconstrained_mlx_model_does_not_match(model, tok):
    mx.random.seed(0)
    ids = [r.token for r in mlx_lm.stream_generate(model, tok, PROMPTS[0], max_tokens=12,
                                                   sampler=make_sampler(temp=1.0))]
    with pytest.raises(AssertionError):
        check_output("regex", tok.decode(ids))
