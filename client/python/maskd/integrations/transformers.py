"""Hugging Face transformers: maskd masks in ``model.generate`` through a LogitsProcessor.

    from maskd.integrations.transformers import MaskdLogitsProcessor
    proc = MaskdLogitsProcessor("unix:///tmp/maskd.sock", "qwen3", regex=r"[0-9]{3}-[0-9]{4}")
    out = model.generate(**inputs, logits_processor=[proc], stopping_criteria=[proc.prefetch],
                         max_new_tokens=32)

One Step per decoding step covers every row of the batch (``num_return_sequences``
rows included). A row ends with an EOS id of the maskd tokenizer; the rows transformers
then pads are not stepped and their logits are left alone. Logits wider than the
tokenizer (padding ids) are masked. Greedy and sampling work; rows that change between
steps (beam search reorders them) raise ``MaskdError`` (FAILED_PRECONDITION) instead of
masking with the wrong state.

Overlap. A LogitsProcessor only learns the sampled token when the next step's logits
are ready, so alone it waits for the round trip after every forward pass.
``proc.prefetch`` is a StoppingCriteria (it never stops generation) that transformers
calls right after sampling, before the next forward pass: it sends the Step then, and
the processor collects the reply when the logits arrive: the RPC overlaps the forward.

One processor serves one ``generate`` call at a time; a new call (a batch of another
shape, or prompts that do not continue the previous rows) starts new sessions. Call
``close()`` (or use it as a context manager) to end the last sessions early; the server
expires idle sessions anyway (--session-ttl).
"""
from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple, Union

import grpc
import numpy as np
import torch
from transformers import LogitsProcessor, StoppingCriteria

from maskd._common import GrammarLike, MaskdError
from maskd.resume import ResumeOptions
from maskd.integrations._core import RowSessions, compile_constraint, connect
from maskd._bitmask_torch import WordsApplier, as_words
from maskd.integrations._row_masks import PackedRows


class _Prefetch(StoppingCriteria):
    """Sends the next Step as soon as the tokens are sampled; never stops generation."""

    def __init__(self, owner: "MaskdLogitsProcessor"):
        self._owner = owner

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs: Any) -> torch.BoolTensor:
        self._owner._prefetch(input_ids)
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)


class MaskdLogitsProcessor(LogitsProcessor):
    """Masks every row's logits with its maskd session's next mask.

    Args:
      client: a maskd.Client or an address ("unix:///tmp/maskd.sock").
      tokenizer: the maskd tokenizer name matching the model's tokenizer.
      regex / json_schema / choices / grammar / structural_tag / index_id: the
        constraint (index_id: an index already compiled for ``tokenizer``) (json_schema:
        str, dict or Pydantic model class; choices: a list of strings; grammar: a
        maskd.Grammar or a str of Lark; structural_tag: a str or a dict).
      eos_token_id: ids that end a row; default: the maskd tokenizer's EOS ids.
      max_new_tokens: budget mode: the ``max_new_tokens`` given to ``generate``. Tokens
        after which the constraint could no longer be completed (and ended with EOS)
        within it are masked, so output closes instead of being cut off (grammars and
        structural tags too: there each budget step walks the allowed tokens).
      resume: True (or a maskd.ResumeOptions): the rows' sessions are
        maskd.ResumableSessions, so a maskd restart (SIGKILL, OOM kill) mid-generation
        loses no row: they are re-created and replayed with the same masks. Needs the
        constraint (not ``index_id``).
    """

    def __init__(self, client: Any, tokenizer: str, *, regex: Optional[str] = None,
                 json_schema: Any = None, choices: Optional[Sequence[str]] = None,
                 grammar: Optional[GrammarLike] = None, structural_tag: Any = None,
                 index_id: Optional[str] = None,
                 eos_token_id: Optional[Sequence[int]] = None,
                 max_new_tokens: Optional[int] = None,
                 resume: Union[bool, ResumeOptions] = False):
        self.client = connect(client, "transformers")
        self.max_new_tokens = max_new_tokens
        self.resume: Optional[Tuple[Any, ResumeOptions]]
        self.index_id, self.resume = compile_constraint(
            self.client, tokenizer, index_id, resume, regex=regex, json_schema=json_schema,
            choices=choices, grammar=grammar, structural_tag=structural_tag)
        self.eos_ids = list(eos_token_id) if eos_token_id is not None else \
            list(self.client.tokenizer(tokenizer).eos_ids)
        self.prefetch = _Prefetch(self)
        self.sessions: Optional[RowSessions] = None
        self._prev: Optional[torch.Tensor] = None  # input_ids of the previous call
        # Per-step buffers, reused while (rows, logits width, device) stay the same: the
        # reply's packed rows laid out for every row of the batch, their copy on the
        # logits' device, and the apply's own.
        self._packed = PackedRows()
        self._words_dev: Optional[torch.Tensor] = None
        self._applier = WordsApplier()

    # -- generation state -----------------------------------------------------
    def _continues(self, input_ids: torch.Tensor) -> bool:
        prev = self._prev
        return (prev is not None and self.sessions is not None
                and input_ids.shape[0] == prev.shape[0] and input_ids.shape[1] == prev.shape[1] + 1)

    def _prefetch(self, input_ids: torch.Tensor) -> None:
        sessions = self.sessions
        if sessions is not None and self._continues(input_ids) and not all(sessions.done):
            sessions.prefetch(input_ids[:, -1].tolist())

    def close(self) -> None:
        """Ends the sessions of the last generation."""
        if self.sessions is not None:
            self.sessions.close()
            self.sessions = None
        self._prev = None

    def __enter__(self) -> "MaskdLogitsProcessor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- LogitsProcessor --------------------------------------------------------
    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        sessions = self.sessions
        if sessions is not None and self._continues(input_ids):
            if not torch.equal(input_ids[:, :-1], self._prev):
                raise MaskdError(
                    grpc.StatusCode.FAILED_PRECONDITION,
                    "MaskdLogitsProcessor: batch rows changed between steps (beam search reorders "
                    "rows); use num_beams=1 (greedy or sampling, num_return_sequences for several)")
            reply, live = sessions.step(input_ids[:, -1].tolist())
        else:
            self.close()
            self.sessions = sessions = RowSessions(
                self.client, self.index_id, self.eos_ids, input_ids.shape[0],
                budget=self.max_new_tokens, resume=self.resume)
            reply, live = sessions.step(None)
        self._prev = input_ids
        self._applier.apply_(scores, self._words(reply.masks, live, scores))  # in place
        return scores

    def _words(self, masks: np.ndarray, live: Sequence[int], scores: torch.Tensor) -> torch.Tensor:
        """(rows, padded words) int32 on scores' device: the reply's rows, padding ids'
        zero words, all ones for rows not live (maskd._bitmask_torch's input). Buffers
        reused across steps; what crosses to a GPU is the packed words (1/32 of a bool
        mask)."""
        words = as_words(self._packed.rows(masks, live, scores.shape[0], scores.shape[-1]))
        if scores.device.type == "cpu":
            return words
        dev = self._words_dev
        if dev is None or dev.shape != words.shape or dev.device != scores.device:
            dev = self._words_dev = torch.empty(words.shape, dtype=torch.int32, device=scores.device)
        return dev.copy_(words, non_blocking=True)
