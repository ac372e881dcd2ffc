"""mlx-lm: maskd masks as a ``logits_processors`` entry.

    from mlx_lm import generate, batch_generate
    from maskd.integrations.mlx_lm import MaskdLogitsProcessor
    proc = MaskdLogitsProcessor("unix:///tmp/maskd.sock", "qwen3", json_schema=schema)
    text = generate(model, tokenizer, prompt, logits_processors=[proc], max_tokens=128)
    out = batch_generate(model, tokenizer, prompts, logits_processors=[proc], max_tokens=128)

mlx-lm calls a processor as ``processor(tokens, logits)``: ``tokens`` is the row's
whole context (prompt + generated, the last one sampled at the previous step) and
``logits`` its (1, vocab) logits. ``generate`` / ``stream_generate`` call it once per
step; ``batch_generate`` calls the same processor once per row per step (ragged rows,
rows leaving as they finish). The processor finds each row's session by the row's
history (a row continues the session whose tokens are its context minus the last
token; a context it has not seen starts a new session), so one object serves both, and
rows with identical histories are interchangeable (same state). mlx-lm gives a
processor no row index, so a new row whose prompt is exactly another live row's context
plus one token would be taken for that row's continuation; prompts that differ before
their last token (any real batch of distinct requests) never are.

Overlap. mlx is lazy: when the processor is called, the forward pass that produces
``logits`` has not run yet. The processor starts it (``mx.async_eval``), then reads
the sampled token and does the Step while the forward runs, and applies the mask
when both are done: the round trip overlaps the forward pass by default.

A row ends at an EOS id of the maskd tokenizer (its session is closed; mlx-lm stops
the row). ``close()`` ends sessions of rows cut by ``max_tokens``; idle sessions
expire on the server anyway (--session-ttl).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import grpc
import mlx.core as mx
import numpy as np

from maskd._common import EntryLike, GrammarLike, MaskdError, status_code
from maskd.integrations._core import connect, constraint_kwargs
from maskd.masks import apply_mask


class MaskdLogitsProcessor:
    """An mlx-lm logits processor backed by maskd sessions (see the module doc).

    Args:
      client: a maskd.Client or an address.
      tokenizer: the maskd tokenizer name matching the model's tokenizer.
      regex / json_schema / choices / grammar / structural_tag / index_id: the
        constraint (index_id: an index already compiled for ``tokenizer``; grammar: a
        maskd.Grammar or a str of Lark; structural_tag: a str or a dict).
      eos_token_id: ids that end a row; default: the maskd tokenizer's EOS ids.
      overlap: start the forward pass before the Step (default True).
      max_tokens: budget mode: the ``max_tokens`` given to mlx-lm (see
        maskd.integrations.transformers).
    """

    def __init__(self, client: Any, tokenizer: str, *, regex: Optional[str] = None,
                 json_schema: Any = None, choices: Optional[Sequence[str]] = None,
                 grammar: Optional[GrammarLike] = None, structural_tag: Any = None,
                 index_id: Optional[str] = None,
                 eos_token_id: Optional[Sequence[int]] = None, overlap: bool = True,
                 max_tokens: Optional[int] = None):
        self.client = connect(client, "mlx-lm")
        self.max_tokens = max_tokens
        self._prompt_len: Dict[int, int] = {}  # session -> its row's prompt length
        if index_id is not None:
            self.index_id = index_id
        else:
            self.index_id = self.client.compile(
                tokenizer,
                **constraint_kwargs(regex, json_schema, choices, grammar, structural_tag)).index_id
        self.eos = set(int(e) for e in (eos_token_id if eos_token_id is not None
                                        else self.client.tokenizer(tokenizer).eos_ids))
        self.overlap = overlap
        # history (the row's whole context, int64 bytes) -> sessions in that state
        self._rows: Dict[bytes, List[int]] = {}
        self.steps = 0

    def __call__(self, tokens: mx.array, logits: mx.array) -> mx.array:
        if self.overlap:
            mx.async_eval(logits)  # the forward pass runs while we talk to maskd
        ids = np.asarray(tokens).astype(np.int64, copy=False)
        ctx = ids.tobytes()  # a C-speed key: no Python tuple of the whole context
        prefix = ctx[:-8]
        parents = self._rows.get(prefix)
        if parents:
            sid = parents.pop()
            if not parents:
                del self._rows[prefix]
            last = int(ids[-1])
            if last in self.eos:
                self._close(sid)
                return logits
            toks = [last]
        else:
            sid = self.client.create_session(self.index_id).session_id
            self._prompt_len[sid] = ids.size
            toks = []
        if self.max_tokens:
            left = self.max_tokens - (ids.size - self._prompt_len[sid])
            entry: EntryLike = (sid, toks, 0, max(1, left))
        else:
            entry = (sid, toks)
        reply = self.client.step([entry])
        r = reply.results[0]
        if r.status.code != 0:
            self._close(sid)
            raise MaskdError(status_code(r.status.code), r.status.message)
        self.steps += 1
        self._rows.setdefault(ctx, []).append(sid)
        # The reply's packed row applied as words (maskd._bitmask_mlx: MLX ops, no NumPy
        # unpacking); ids past the mask (logits wider than the tokenizer) are masked.
        masked: mx.array = apply_mask(logits, reply.masks)
        return masked

    def _close(self, sid: int) -> None:
        self._prompt_len.pop(sid, None)
        try:
            self.client.close_session(sid)
        except MaskdError as e:
            if e.code != grpc.StatusCode.NOT_FOUND:
                raise

    @property
    def open_sessions(self) -> int:
        return sum(len(v) for v in self._rows.values())

    def close(self) -> None:
        """Closes the sessions of rows that did not reach EOS."""
        rows, self._rows = self._rows, {}
        for sids in rows.values():
            for sid in sids:
                self._close(sid)

    def __enter__(self) -> "MaskdLogitsProcessor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
