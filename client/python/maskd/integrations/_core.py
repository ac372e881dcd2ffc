"""What every adapter shares: constraints → Compile arguments, and the sessions of one
batched generation (one Step per decoding step for all live rows, sent early when the
engine's loop tells the sampled tokens before the next forward pass)."""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import grpc
import numpy as np

from maskd._common import GrammarLike, MaskdError, StepReply, compile_request, status_code
from maskd.client import Client, StepFuture
from maskd.resume import (ResumableSession, ResumableStepFuture, ResumeOptions, step_resumable,
                          step_resumable_async)


def constraint_kwargs(regex: Optional[str] = None, json_schema: Any = None,
                      choices: Optional[Sequence[str]] = None,
                      grammar: Optional[GrammarLike] = None,
                      structural_tag: Any = None) -> Dict[str, Any]:
    """One constraint as Compile keyword arguments.

    ``json_schema``: a JSON Schema as a str, a dict, or a Pydantic model class;
    ``choices``: strings, one of which is generated exactly;
    ``grammar``: a ``maskd.Grammar``, or a str of Lark;
    ``structural_tag``: a str or a dict (docs/grammars.md, "Structural tags").
    """
    given = [x is not None for x in (regex, json_schema, choices, grammar, structural_tag)]
    if sum(given) != 1:
        raise ValueError("give exactly one of regex=, json_schema=, choices=, grammar=, "
                         "structural_tag=")
    if regex is not None:
        return {"regex": regex}
    if grammar is not None:
        return {"grammar": grammar}
    if structural_tag is not None:
        return {"structural_tag": structural_tag}
    if choices is not None:
        if not choices:
            raise ValueError("choices must not be empty")
        return {"regex": "(" + "|".join(re.escape(str(c)) for c in choices) + ")"}
    if isinstance(json_schema, str):
        return {"json_schema": json_schema}
    if isinstance(json_schema, dict):
        return {"json_schema": json.dumps(json_schema)}
    if hasattr(json_schema, "model_json_schema"):
        return {"json_schema": json.dumps(json_schema.model_json_schema())}
    raise TypeError("json_schema must be a str, a dict or a Pydantic model class")


def compile_constraint(client: Client, tokenizer: str, index_id: Optional[str],
                       resume: Union[bool, ResumeOptions],
                       **constraint: Any) -> Tuple[str, Optional[Tuple[Any, ResumeOptions]]]:
    """A processor's index and, with ``resume``, the CompileRequest its ResumableSessions
    re-create from. ``index_id``: an index already compiled (then no constraint and no
    resume); else ``constraint`` is constraint_kwargs' keywords (regex=, json_schema=, ...)."""
    if index_id is not None:
        if resume:
            raise ValueError("resume=True needs the constraint "
                             "(regex=/json_schema=/choices=/grammar=), not index_id=")
        return index_id, None
    kw = constraint_kwargs(**constraint)
    ix = client.compile(tokenizer, **kw).index_id
    if not resume:
        return ix, None
    opts = resume if isinstance(resume, ResumeOptions) else ResumeOptions()
    return ix, (compile_request(tokenizer, **kw), opts)


def connect(client: Any, client_name: str) -> Client:
    """``client`` itself when it is a Client, else a new Client to that address that names
    the engine (``client_name``) in its user agent (the server's per-engine metrics)."""
    return client if isinstance(client, Client) else Client(str(client), client_name=client_name)


class RowSessions:
    """The maskd sessions of one batched generation: row i of the batch is session i.

    A row ends when it samples one of ``eos_ids``; it is not stepped after that (the
    engine pads it) and its logits are left alone. ``step(tokens)`` takes the token
    each row sampled last step (ignored for ended rows) and returns the reply plus the
    rows it covers; ``prefetch(tokens)`` sends the same Step without waiting, and the
    ``step(tokens)`` that follows with the same tokens collects it.

    ``budget`` (budget mode): the engine's max_new_tokens; each entry then carries the
    tokens its row may still generate (StepEntry.max_tokens_left), so that maskd masks
    tokens after which the constraint could no longer end within the budget.

    ``resume`` (a CompileRequest and its ResumeOptions): the rows are
    ``maskd.ResumableSession``s, so a maskd restart mid-generation loses no row.
    """

    def __init__(self, client: Client, index_id: str, eos_ids: Sequence[int], rows: int,
                 budget: Optional[int] = None,
                 resume: Optional[Tuple[Any, ResumeOptions]] = None):
        self.client = client
        self.budget = budget
        self.eos = set(int(e) for e in eos_ids)
        self.ids: List[Any] = []  # session ids, or ResumableSessions with resume
        self.resumable = resume is not None
        try:
            for _ in range(rows):
                if resume is not None:
                    self.ids.append(ResumableSession(client, resume[0], resume[1]))
                else:
                    self.ids.append(client.create_session(index_id).session_id)
        except BaseException:
            self.close()
            raise
        self.done = [False] * rows
        self.tokens: List[List[int]] = [[] for _ in range(rows)]
        self._pending: Optional[Tuple[Tuple[int, ...], List[int],
                                      Union[StepFuture, ResumableStepFuture]]] = None
        self.steps = 0
        self.prefetched = 0  # steps whose reply came from prefetch()

    @property
    def rows(self) -> int:
        return len(self.ids)

    def _entries(self, tokens: Optional[Sequence[int]]) -> Tuple[List[Tuple[Any, ...]], List[int]]:
        entries: List[Tuple[Any, ...]] = []
        live: List[int] = []
        for i, sid in enumerate(self.ids):
            if self.done[i]:
                continue
            if tokens is None:
                toks: List[int] = []
            else:
                t = int(tokens[i])
                if t in self.eos:
                    self.done[i] = True
                    continue
                toks = [t]
            if self.budget:
                left = self.budget - len(self.tokens[i]) - len(toks)
                entries.append((sid, toks, 0, max(1, left)))
            else:
                entries.append((sid, toks))
            live.append(i)
        return entries, live

    def prefetch(self, tokens: Sequence[int]) -> None:
        """Starts the Step for ``tokens`` (the sampled tokens) without waiting."""
        key = tuple(int(t) for t in tokens)
        done_before = list(self.done)
        entries, live = self._entries(key)
        self.done = done_before  # step() re-derives them; only the request is sent now
        fut = step_resumable_async(entries) if self.resumable else self.client.step_async(entries)
        self._pending = (key, live, fut)

    def step(self, tokens: Optional[Sequence[int]]) -> Tuple[StepReply, List[int]]:
        """The next masks: ``tokens`` None on the first step (no token yet)."""
        key = None if tokens is None else tuple(int(t) for t in tokens)
        pending, self._pending = self._pending, None
        entries, live = self._entries(key)
        if pending is not None and pending[0] == key and pending[1] == live:
            reply = pending[2].result()
            self.prefetched += 1
        else:
            if pending is not None:
                pending[2].cancel()
            if not entries:
                reply = None
            elif self.resumable:
                reply = step_resumable(entries)
            else:
                reply = self.client.step(entries)
        self.steps += 1
        if reply is None:
            return StepReply([], np.zeros((0, 0), np.uint32), 0), []
        for j, r in enumerate(reply.results):
            if r.status.code != 0:
                row = live[j]
                raise MaskdError(status_code(r.status.code),
                                 f"batch row {row}: {r.status.message}", entry=j)
        if key is not None:
            for i in live:
                self.tokens[i].append(key[i])
        return reply, live

    def close(self) -> None:
        """Closes every session (an already expired one is not an error)."""
        if self._pending is not None:
            self._pending[2].cancel()
            self._pending = None
        for sid in self.ids:
            if isinstance(sid, ResumableSession):
                sid.close()
                continue
            try:
                self.client.close_session(sid)
            except MaskdError as e:
                if e.code != grpc.StatusCode.NOT_FOUND:
                    raise
        self.ids = []

