"""Local random-weight models and the bundled tokenizer for the adapter tests (no hub).

The models are real model classes (transformers' LlamaForCausalLM, mlx-lm's llama
Model) built from a config with random weights; their logits are 151,936 wide (Qwen3's
logits width) while the bundled tokenizer has 151,669 ids, so every test also covers
padding ids. Constraints used by every adapter's tests are defined here.
"""
from __future__ import annotations

import json
import pathlib

import regex as re_mod

MODEL_VOCAB = 151936
EOS = [151643, 151645]  # <|endoftext|>, <|im_end|>
PAD = 151643

REGEX = r"[0-9]{3}-[0-9]{4}( ext\. [0-9]{1,3})?"
CHOICES = ["red", "green", "blue", "dark blue", "yellow"]
# Nested lists of integers (a context-free language), as a Lark grammar: every finished
# output is a JSON list whose leaves are ints (int_lists, with json.loads, checks it).
LIST_LARK = r"""
start: list
list: "[" [value ("," value)*] "]"
?value: list | NUM
NUM: /0|[1-9][0-9]*/
"""


def int_lists(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, int) or int_lists(x) for x in v)

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 8},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b", "c"]}, "maxItems": 3},
        "address": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "maxLength": 6},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
                "geo": {"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2},
            },
            "required": ["city", "zip", "geo"],
            "additionalProperties": False,
        },
    },
    "required": ["name", "age", "tags", "address"],
    "additionalProperties": False,
}
PROMPTS = ["Hello", "Write a phone number for the shop on the corner of the street:"]


def check_output(kind: str, text: str) -> None:
    """Independent checks: `regex` full match, `jsonschema` validation."""
    if kind == "regex":
        assert re_mod.fullmatch(REGEX, text), text
    elif kind == "choices":
        assert text in CHOICES, text
    else:
        import jsonschema

        jsonschema.validate(json.loads(text), SCHEMA)


def constraint(kind: str) -> dict:
    return {"regex": {"regex": REGEX}, "choices": {"choices": CHOICES},
            "schema": {"json_schema": SCHEMA}}[kind]


def hf_tokenizer(qwen3_dir: pathlib.Path):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast(tokenizer_file=str(qwen3_dir / "tokenizer.json"),
                                  eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.padding_side = "left"
    return tok


def llama(seed: int = 0, layers: int = 2, hidden: int = 64):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=MODEL_VOCAB, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, eos_token_id=EOS, pad_token_id=PAD,
                      bos_token_id=None, tie_word_embeddings=False)
    return LlamaForCausalLM(cfg).eval()


def mlx_llama(seed: int = 0, layers: int = 2, hidden: int = 64):
    import mlx.core as mx
    from mlx_lm.models.llama import Model, ModelArgs

    mx.random.seed(seed)
    model = Model(ModelArgs(model_type="llama", hidden_size=hidden, num_hidden_layers=layers,
                            intermediate_size=2 * hidden, num_attention_heads=4, num_key_value_heads=2,
                            rms_norm_eps=1e-5, vocab_size=MODEL_VOCAB, tie_word_embeddings=False))
    mx.eval(model.parameters())
    return model


def mlx_tokenizer(qwen3_dir: pathlib.Path):
    from mlx_lm.tokenizer_utils import TokenizerWrapper

    return TokenizerWrapper(hf_tokenizer(qwen3_dir), eos_token_ids=EOS)


def pydantic_person():
    """The Pydantic twin of SCHEMA (nested object, arrays, bounds), for Outlines' output types."""
    from typing import List, Literal

    from pydantic import BaseModel, ConfigDict, Field

    class Address(BaseModel):
        model_config = ConfigDict(extra="forbid")
        city: str = Field(max_length=6)
        zip: str = Field(pattern=r"^[0-9]{5}$")
        geo: List[bool] = Field(min_length=1, max_length=2)

    class Person(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = Field(max_length=8)
        age: int = Field(ge=0, le=120)
        tags: List[Literal["a", "b", "c"]] = Field(max_length=3)
        address: Address

    return Person
