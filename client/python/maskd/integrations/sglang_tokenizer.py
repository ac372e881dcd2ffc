"""SGLang's tokenizer registered with maskd under a name derived from its content, once
per (process, maskd address): two SGLang processes (or restarts) with the same
tokenizer, logits width and EOS ids share the name, and RegisterTokenizer of the same
name and content is a no-op on the server."""
from __future__ import annotations

import hashlib
import json
import os
import threading
from typing import Any, Dict, Iterable, List, Optional, Tuple

from maskd.client import Client

_registered: Dict[Tuple[str, str], str] = {}  # (address, digest) -> name
_lock = threading.Lock()


def tokenizer_documents(tokenizer: Any) -> Tuple[bytes, bytes]:
    """(tokenizer.json, tokenizer_config.json) bytes of a Hugging Face fast tokenizer:
    the in-memory tokenizer's JSON (added tokens included) when it has one, else the
    files of its folder. The config is b"" when there is none (EOS ids are passed)."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    folder = str(getattr(tokenizer, "name_or_path", "") or "")
    if backend is not None and hasattr(backend, "to_str"):
        doc = backend.to_str().encode()
    elif folder and os.path.isfile(os.path.join(folder, "tokenizer.json")):
        with open(os.path.join(folder, "tokenizer.json"), "rb") as f:
            doc = f.read()
    else:
        raise ValueError(f"maskd: tokenizer {type(tokenizer).__name__} has no tokenizer.json "
                         "(maskd needs a Hugging Face fast tokenizer)")
    config = b""
    if folder and os.path.isfile(os.path.join(folder, "tokenizer_config.json")):
        with open(os.path.join(folder, "tokenizer_config.json"), "rb") as f:
            config = f.read()
    return doc, config


def eos_ids_of(tokenizer: Any, eos_token_ids: Optional[Iterable[int]]) -> List[int]:
    """The ids that end a request: SGLang's (the model's EOS ids), else the tokenizer's."""
    ids = sorted(int(t) for t in (eos_token_ids or ()))
    if not ids and getattr(tokenizer, "eos_token_id", None) is not None:
        ids = [int(tokenizer.eos_token_id)]
    return ids


def register(client: Client, tokenizer: Any, vocab_size: int, eos_ids: List[int]) -> str:
    """The maskd name of ``tokenizer`` with logits width ``vocab_size`` and ``eos_ids``:
    ``sglang-`` + 24 hex digits of the SHA-256 of all three."""
    doc, config = tokenizer_documents(tokenizer)
    h = hashlib.sha256()
    for part in (doc, config, json.dumps([int(vocab_size), eos_ids]).encode()):
        h.update(len(part).to_bytes(8, "little"))
        h.update(part)
    digest = h.hexdigest()
    key = (client.addr, digest)
    with _lock:
        name = _registered.get(key)
        if name is None:
            name = "sglang-" + digest[:24]
            client.register_tokenizer(name, doc, tokenizer_config_json=config,
                                      vocab_size=int(vocab_size), eos_ids=eos_ids)
            _registered[key] = name
    return name
