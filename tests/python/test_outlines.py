"""maskd.integrations.outlines end to end: Outlines' model wrappers (transformers and
mlx-lm, random-weight local models, bundled tokenizer), Outlines output types (Regex,
a Pydantic model, Literal), outputs checked by independent matchers."""
from __future__ import annotations

import json
from typing import Literal

import pytest

from conftest import need
from models import (CHOICES, EOS, LIST_LARK, PROMPTS, REGEX, hf_tokenizer, int_lists, llama,
                    mlx_llama, mlx_tokenizer, pydantic_person)

outlines = need("outlines")
torch = need("torch")
import jsonschema  # noqa: E402
import regex as re_mod  # noqa: E402
from transformers import StoppingCriteria, StoppingCriteriaList  # noqa: E402

from maskd.integrations.outlines import Generator  # noqa: E402

Person = pydantic_person()
OUTPUT_TYPES = {
    "regex": outlines.types.Regex(REGEX),
    "pydantic": Person,
    "literal": Literal["red", "green", "blue", "dark blue", "yellow"],
}


def check(kind, text):
    if kind == "regex":
        assert re_mod.fullmatch(REGEX, text), text
    elif kind == "literal":
        assert text in CHOICES, text
    else:
        jsonschema.validate(json.loads(text), Person.model_json_schema())
        Person.model_validate_json(text)


class LastIds(StoppingCriteria):
    """Records the last input_ids transformers had (to see every row's EOS)."""

    def __call__(self, input_ids, scores, **kw):
        self.ids = input_ids
        return torch.zeros(input_ids.shape[0], dtype=torch.bool)


@pytest.fixture(scope="module")
def hf_model(qwen3_dir):
    return outlines.from_transformers(llama(), hf_tokenizer(qwen3_dir))


@pytest.fixture(scope="module")
def mlx_model(qwen3_dir):
    need("mlx_lm")
    return outlines.from_mlxlm(mlx_llama(), mlx_tokenizer(qwen3_dir))


@pytest.mark.parametrize("kind", list(OUTPUT_TYPES))
def test_outlines_transformers(addr, hf_model, kind):
    gen = Generator(hf_model, OUTPUT_TYPES[kind], client=addr, tokenizer="qwen3")
    texts = []
    for seed in range(2):
        torch.manual_seed(seed)
        last = LastIds()
        out = gen.batch(PROMPTS, max_new_tokens=120, do_sample=True, top_k=0, num_return_sequences=5,
                        stopping_criteria=StoppingCriteriaList([gen.logits_processor.prefetch, last]))
        flat = [t for row in out for t in (row if isinstance(row, list) else [row])]
        assert len(flat) == 10
        texts += flat
        for ids in last.ids.tolist():
            assert any(t in EOS for t in ids[-120:]), "a row did not reach EOS"
        assert gen.logits_processor.inner.sessions.prefetched > 0
    texts.append(gen(PROMPTS[0], max_new_tokens=120))  # greedy, one prompt
    gen.close()
    assert len(texts) == 21
    for t in texts:
        check(kind, t)


@pytest.mark.parametrize("kind", list(OUTPUT_TYPES))
def test_outlines_mlxlm(addr, mlx_model, kind):
    mx = need("mlx.core")
    from mlx_lm.sample_utils import make_sampler

    gen = Generator(mlx_model, OUTPUT_TYPES[kind], client=addr, tokenizer="qwen3")
    for seed in range(20):
        mx.random.seed(seed)
        text = gen(PROMPTS[seed % 2], max_tokens=120, sampler=make_sampler(temp=1.0))
        assert gen.logits_processor.inner.open_sessions == 0, "no EOS within max_tokens"
        check(kind, text)
    gen.close()


def test_cfg_output_type_is_a_maskd_grammar(addr, hf_model):
    gen = Generator(hf_model, outlines.types.CFG(LIST_LARK), client=addr, tokenizer="qwen3")
    ended = 0
    for seed in range(4):
        torch.manual_seed(seed)
        last = LastIds()
        out = gen.batch(PROMPTS, max_new_tokens=60, do_sample=True, top_k=0, num_return_sequences=2,
                        stopping_criteria=StoppingCriteriaList([gen.logits_processor.prefetch, last]))
        flat = [t for row in out for t in (row if isinstance(row, list) else [row])]
        for text, ids in zip(flat, last.ids.tolist()):
            if any(t in EOS for t in ids[-60:]):
                assert int_lists(json.loads(text)), text
                ended += 1
            else:  # cut by max_new_tokens: still a viable prefix
                assert text.startswith("["), text
    gen.close()
    assert ended >= 1
