"""The tiny random-weight Llama of tiny_model.py as a GGUF file, for llama.cpp and
llama-cpp-python: same shape, same tokenizer (the bundled Qwen3 one, 151,669 ids in a
151,936-wide vocabulary), weights drawn with numpy (not the HF model's: no torch here).

    from tiny_gguf import gguf_model_path
    path = gguf_model_path()      # built once, then cached

Written with PyPI's ``gguf`` package directly (llama.cpp's convert_hf_to_gguf.py needs
transformers): the token list, types and merges are what that script writes for a
Qwen2-style byte-level BPE tokenizer (pre-tokenizer "qwen2"; ids past the tokenizer are
"[PAD<i>]" of type UNUSED; added special tokens CONTROL, other added tokens
USER_DEFINED). The cache file is named by a digest of the shape, the tokenizer's bytes,
the gguf version and FORMAT below, so any change builds a new one.

Run as a script to print the path (building it if needed).
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import pathlib
import sys
import tempfile
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from tiny_model import CACHE, EOS_IDS, SHAPE, TOKENIZER_DIR, WEIGHT_SEED  # noqa: E402

# Bumped when what this file writes changes.
FORMAT = 1


def _tokenizer() -> Tuple[Dict[str, Any], bytes]:
    raw = gzip.decompress((TOKENIZER_DIR / "tokenizer.json.gz").read_bytes())
    return json.loads(raw), raw


def _digest(raw: bytes) -> str:
    from importlib.metadata import version
    h = hashlib.sha256()
    h.update(json.dumps([SHAPE, EOS_IDS, WEIGHT_SEED, FORMAT, version("gguf")],
                        sort_keys=True).encode())
    h.update(raw)
    return h.hexdigest()[:16]


def _vocab(tok: Dict[str, Any], size: int) -> Tuple[List[str], List[int], List[str]]:
    """tokens, token types, merges ("a b") as convert_hf_to_gguf.py writes them."""
    import gguf
    tokens = [f"[PAD{i}]" for i in range(size)]
    types = [int(gguf.TokenType.UNUSED)] * size
    for text, i in tok["model"]["vocab"].items():
        tokens[i] = text
        types[i] = int(gguf.TokenType.NORMAL)
    for a in tok["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = int(gguf.TokenType.CONTROL if a["special"] else gguf.TokenType.USER_DEFINED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    return tokens, types, merges


def _write(path: pathlib.Path, tok: Dict[str, Any]) -> None:
    import gguf
    import numpy as np

    s = SHAPE
    vocab, hidden, ff = s["vocab_size"], s["hidden_size"], s["intermediate_size"]
    heads, kv, head_dim = s["num_attention_heads"], s["num_key_value_heads"], s["head_dim"]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("maskd-tiny-qwen3-llama")
    w.add_context_length(s["max_position_embeddings"])
    w.add_embedding_length(hidden)
    w.add_block_count(s["num_hidden_layers"])
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(s["rope_theta"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    tokens, types, merges = _vocab(tok, vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(EOS_IDS[0])
    w.add_pad_token_id(EOS_IDS[1])
    w.add_add_bos_token(False)

    rng = np.random.default_rng(WEIGHT_SEED)

    def normal(*shape: int, std: float, dtype=np.float32) -> "np.ndarray":
        return (rng.standard_normal(shape, dtype=np.float32) * std).astype(dtype)

    # numpy shapes are (out, in); the writer stores them reversed, as ggml wants.
    w.add_tensor("token_embd.weight", normal(vocab, hidden, std=1.0, dtype=np.float16))
    for b in range(s["num_hidden_layers"]):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(p + "attn_q.weight", normal(heads * head_dim, hidden, std=0.1))
        w.add_tensor(p + "attn_k.weight", normal(kv * head_dim, hidden, std=0.1))
        w.add_tensor(p + "attn_v.weight", normal(kv * head_dim, hidden, std=0.1))
        w.add_tensor(p + "attn_output.weight", normal(hidden, heads * head_dim, std=0.1))
        w.add_tensor(p + "ffn_norm.weight", np.ones(hidden, np.float32))
        w.add_tensor(p + "ffn_gate.weight", normal(ff, hidden, std=0.1))
        w.add_tensor(p + "ffn_up.weight", normal(ff, hidden, std=0.1))
        w.add_tensor(p + "ffn_down.weight", normal(hidden, ff, std=0.1))
    w.add_tensor("output_norm.weight", np.ones(hidden, np.float32))
    # Untied like tiny_model's; std 0.3 gives logits a spread of a few units.
    w.add_tensor("output.weight", normal(vocab, hidden, std=0.3, dtype=np.float16))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def gguf_model_path() -> pathlib.Path:
    """The tiny GGUF (~40 MB), built on first use under CACHE (MASKD_ENGINE_CACHE)."""
    tok, raw = _tokenizer()
    path = CACHE / f"tiny-llama-qwen3-{_digest(raw)}.gguf"
    if path.exists():
        return path
    CACHE.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tiny-gguf-", dir=CACHE)
    os.close(fd)
    try:
        _write(pathlib.Path(tmp), tok)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)  # atomic: concurrent builders write the same bytes
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


if __name__ == "__main__":
    print(gguf_model_path())
