"""A tiny random-weight Llama with a real tokenizer (the bundled Qwen3 one), built once
and cached, so every engine runs real generation with nothing from a hub.

hf_model_dir() builds it with the engine venv's torch + transformers: config, bf16
safetensors, tokenizer.json / tokenizer_config.json, generation_config.json. The cache
folder is named by a digest of the shape below, the tokenizer's bytes and the
transformers version, so a change of any of them builds a new one.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import shutil
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[2]
TOKENIZER_DIR = REPO / "data" / "tokenizers" / "qwen3"
CACHE = pathlib.Path(os.environ.get("MASKD_ENGINE_CACHE",
                                    pathlib.Path.home() / ".cache" / "maskd-engines")) / "models"

# Qwen3's logits width: 267 ids past the tokenizer's 151,669 are padding, as in the real
# model. head_dim 32: vLLM's CPU attention needs at least 32.
SHAPE = dict(vocab_size=151936, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1, head_dim=32,
             max_position_embeddings=512, rope_theta=10000.0, tie_word_embeddings=False)
EOS_IDS = [151645, 151643]  # <|im_end|>, <|endoftext|>
WEIGHT_SEED = 0


def _tokenizer_json() -> bytes:
    return gzip.decompress((TOKENIZER_DIR / "tokenizer.json.gz").read_bytes())


def _digest() -> str:
    import transformers
    h = hashlib.sha256()
    h.update(json.dumps(SHAPE, sort_keys=True).encode())
    h.update(json.dumps([EOS_IDS, WEIGHT_SEED, transformers.__version__]).encode())
    h.update(_tokenizer_json())
    h.update((TOKENIZER_DIR / "tokenizer_config.json").read_bytes())
    return h.hexdigest()[:16]


def write_tokenizer(out: pathlib.Path) -> None:
    """tokenizer.json and tokenizer_config.json of the bundled Qwen3 tokenizer into out."""
    (out / "tokenizer.json").write_bytes(_tokenizer_json())
    shutil.copyfile(TOKENIZER_DIR / "tokenizer_config.json", out / "tokenizer_config.json")


def _build(out: pathlib.Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(WEIGHT_SEED)
    config = LlamaConfig(**SHAPE, bos_token_id=None, eos_token_id=EOS_IDS,
                         pad_token_id=EOS_IDS[1], torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(eos_token_id=EOS_IDS, pad_token_id=EOS_IDS[1],
                     bos_token_id=None).save_pretrained(out)
    write_tokenizer(out)


def hf_model_dir() -> pathlib.Path:
    """The cached model folder, built on first use (a few seconds)."""
    final = CACHE / f"tiny-llama-qwen3-{_digest()}"
    if (final / ".complete").exists():
        return final
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="build-", dir=CACHE))
    try:
        _build(tmp)
        (tmp / ".complete").touch()
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


if __name__ == "__main__":
    print(hf_model_dir())
