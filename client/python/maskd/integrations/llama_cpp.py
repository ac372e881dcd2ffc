"""llama-cpp-python: maskd masks through a LogitsProcessor.

    from llama_cpp import Llama, LogitsProcessorList
    from maskd.integrations.llama_cpp import MaskdLogitsProcessor
    llm = Llama("model.gguf")
    proc = MaskdLogitsProcessor("unix:///tmp/maskd.sock", "qwen3",
                                json_schema=schema, max_new_tokens=64)
    out = llm.create_completion(prompt, max_tokens=64,
                                logits_processor=LogitsProcessorList([proc]))

llama-cpp-python (0.3.x) runs its logits processors inside llama.cpp's sampler chain,
as its first sampler: each call gets every token in the context (prompt, then the
tokens generated so far) and the next token's logits over the whole vocabulary, in id
order. The first call of a generation starts a maskd session (the context then is the
prompt); each later call that extends the previous context by one token steps it with
that token. The mask's packed uint32 words are applied in place by maskd.apply_mask
(bitwise on the logits' integer lanes: no bool array, no per-token Python; the strided
view llama-cpp-python passes is fine). Ids past the mask width (padding ids of the
model's vocabulary) are masked. A sampled EOS id ends the session.

Not covered: llama-cpp-python has no hook between sampling and the next forward pass
(its stopping criteria see the context without the new token), so the Step waits for
the forward pass instead of overlapping it; one processor serves one sequence at a
time (llama-cpp-python generates one sequence per Llama); a context that does not
extend the previous one by one token starts a new session (a new generation). Call
``close()`` between generations (or use a processor per generation, as a context
manager): a new prompt that happened to extend the previous context by exactly one
token would otherwise continue the old session.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import numpy as np

from maskd._common import GrammarLike
from maskd.resume import ResumeOptions
from maskd.integrations._core import RowSessions, compile_constraint, connect
from maskd.masks import apply_mask


class MaskdLogitsProcessor:
    """A llama-cpp-python LogitsProcessor: ``(input_ids, scores) -> scores``.

    Args:
      client: a maskd.Client or an address ("unix:///tmp/maskd.sock").
      tokenizer: the maskd tokenizer name matching the model's tokenizer (same ids).
      regex / json_schema / choices / grammar / structural_tag / index_id: the
        constraint, as for maskd.integrations.transformers.MaskdLogitsProcessor
        (grammar: a maskd.Grammar, e.g. maskd.Grammar(text, "gbnf"), or a str of Lark).
      eos_token_id: ids that end the sequence; default: the maskd tokenizer's EOS ids.
      max_new_tokens: budget mode: the ``max_tokens`` given to llama-cpp-python, so
        that output closes within it instead of being cut off.
      resume: True (or a maskd.ResumeOptions): a maskd restart mid-generation loses
        nothing (maskd.ResumableSession). Needs the constraint, not ``index_id``.
    """

    def __init__(self, client: Any, tokenizer: str, *, regex: Optional[str] = None,
                 json_schema: Any = None, choices: Optional[Sequence[str]] = None,
                 grammar: Optional[GrammarLike] = None, structural_tag: Any = None,
                 index_id: Optional[str] = None,
                 eos_token_id: Optional[Sequence[int]] = None,
                 max_new_tokens: Optional[int] = None,
                 resume: Union[bool, ResumeOptions] = False):
        self.client = connect(client, "llama.cpp")
        self.max_new_tokens = max_new_tokens
        self.resume: Optional[Tuple[Any, ResumeOptions]]
        self.index_id, self.resume = compile_constraint(
            self.client, tokenizer, index_id, resume, regex=regex, json_schema=json_schema,
            choices=choices, grammar=grammar, structural_tag=structural_tag)
        self.eos_ids = list(eos_token_id) if eos_token_id is not None else \
            list(self.client.tokenizer(tokenizer).eos_ids)
        self.sessions: Optional[RowSessions] = None
        self._prev: Optional[np.ndarray] = None  # the context of the previous call

    @property
    def generated(self) -> List[int]:
        """Tokens of the current generation that maskd accepted."""
        return list(self.sessions.tokens[0]) if self.sessions is not None else []

    def close(self) -> None:
        """Ends the current generation's session."""
        if self.sessions is not None:
            self.sessions.close()
            self.sessions = None
        self._prev = None

    def __enter__(self) -> "MaskdLogitsProcessor":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _continues(self, input_ids: np.ndarray) -> bool:
        prev = self._prev
        return (prev is not None and self.sessions is not None
                and len(input_ids) == len(prev) + 1
                and np.array_equal(input_ids[:-1], prev))

    def __call__(self, input_ids: np.ndarray, scores: np.ndarray) -> np.ndarray:
        sessions = self.sessions
        if sessions is not None and self._continues(input_ids):
            reply, live = sessions.step([int(input_ids[-1])])
        else:
            self.close()
            self.sessions = sessions = RowSessions(self.client, self.index_id, self.eos_ids, 1,
                                                   budget=self.max_new_tokens, resume=self.resume)
            reply, live = sessions.step(None)
        self._prev = np.array(input_ids, copy=True)
        if live:  # else the sequence ended (EOS): logits left alone
            apply_mask(scores, reply.masks[0])
        return scores
