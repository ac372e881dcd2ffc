"""SGLang grammar backend served by maskd: ``--grammar-backend maskd``.

    pip install maskd          # its sglang.srt.plugins entry point adds the backend
    MASKD_ADDR=unix:///tmp/maskd.sock python -m sglang.launch_server \\
        --model-path Qwen/Qwen3-8B --grammar-backend maskd

SGLang loads the plugin (``register_plugin``) in every process before it parses its
arguments: the plugin adds ``maskd`` to ``--grammar-backend``'s choices, registers the
backend, and hooks the grammar manager so that each request's grammar knows its
``max_new_tokens`` (maskd's budget mode: output closes within the budget instead of
being cut off), and the scheduler so that each step's Step leaves early (below).
Requests' ``regex``, ``json_schema``, ``ebnf`` (XGrammar's EBNF, which maskd reads as
its ``ebnf`` grammar format; a Lark grammar there is recognised by its ``name:``
rules) and ``structural_tag`` are compiled by maskd against SGLang's own tokenizer,
registered with maskd once per process under a name derived from its content
(sglang_tokenizer.py).

Per scheduler step. SGLang accepts each request's sampled token (``accept_token``),
then, before sampling the next one, asks for the vocab mask of every grammar request
of the batch in one call (``fill_vocab_mask_batched``). ``accept_token`` checks the
token against the request's last mask (one bit) and queues it. When the scheduler has
processed the batch's results (the hook on ``Scheduler.process_batch_result``),
``prefetch`` sends ONE maskd Step for every row with queued tokens (and rollbacks)
without waiting; the fill takes its reply (rows that moved meanwhile are stepped then,
together) and copies the packed uint32 rows into SGLang's int32 vocab mask as they are
(the layout is XGrammar's). ``apply_vocab_mask`` is one vectorised torch op.

Sessions are created lazily on a grammar's first fill (the copies SGLang keeps in its
grammar cache never hold one) and closed when SGLang marks the request finished or
drops the grammar. A session the server lost (expired: NOT_FOUND) is re-created and
replayed; any other maskd failure allows only EOS in that row (the request ends) and
is logged, rather than crashing the scheduler.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import grpc
import numpy as np
import torch
from sglang.srt.constrained.base_grammar_backend import (BaseGrammarBackend, BaseGrammarObject,
                                                         GrammarRow, GrammarStats,
                                                         InvalidGrammarObject)

from maskd._common import EntryLike, Grammar, MaskdError, StepReply
from maskd.client import Client, StepFuture
from maskd.integrations import sglang_masks, sglang_tags, sglang_tokenizer

logger = logging.getLogger(__name__)

BACKEND_NAME = "maskd"
DEFAULT_ADDR = "unix:///tmp/maskd.sock"
# Entries per Step RPC (chunks of a larger batch go out concurrently): below the
# server's default --max-batch, and 256 rows of a 152k vocabulary are ~4.9 MB.
MAX_STEP_ROWS = 256


def _allowed(mask: np.ndarray, token: int) -> bool:
    w = token >> 5
    return w < mask.shape[0] and bool((int(mask[w]) >> (token & 31)) & 1)


# The first rule of a grammar: `name ::=` (EBNF, GBNF) or `name:` / `?name:` (Lark).
_FIRST_RULE = re.compile(r"^[ \t]*[?!]?[A-Za-z_][\w-]*(?:\.-?\d+)?[ \t]*(::=|:)", re.M)


def grammar_format(text: str) -> str:
    """"lark" when the grammar's first rule is written `name: ...` (Lark), else "ebnf"
    (`name ::= ...`, XGrammar's EBNF, which SGLang's ``ebnf`` requests carry)."""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "//", "%")):
            continue
        m = _FIRST_RULE.match(line)
        return "lark" if m is not None and m.group(1) == ":" else "ebnf"
    return "ebnf"


def _utf8_prefix(data: bytes) -> str:
    """The longest prefix of ``data`` that is whole UTF-8 characters."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            return data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
    return data.decode("utf-8", errors="ignore")


class MaskdGrammar(BaseGrammarObject):
    """One request's constraint state, held by a maskd session.

    Invariants: ``tokens`` are the tokens accepted so far (the request's output). The
    session holds the state after ``tokens`` minus ``unsent`` (a suffix of it) plus
    ``unsent_rollback`` tokens since undone; the next Step entry sends exactly
    (rollback=unsent_rollback, tokens=unsent). ``mask`` (uint32 words) and ``forced``
    are the session's reply at its state, so they describe the state after ``tokens``
    only when ``synced()``.
    """

    def __init__(self, backend: "MaskdGrammarBackend", index_id: str, key_string: str,
                 dispatch_type: str) -> None:
        super().__init__()
        self.backend = backend
        self.index_id = index_id
        self.key_string = key_string
        self.dispatch_type = dispatch_type
        self.grammar_stats = GrammarStats(dispatch_type=dispatch_type)
        self.session_id: Optional[int] = None
        self.tokens: List[int] = []
        self.unsent: List[int] = []
        self.unsent_rollback = 0
        self.mask: Optional[np.ndarray] = None
        self.forced = b""
        # max_new_tokens of the request (set by the plugin's grammar-manager hook, or by
        # the caller): each Step then carries the tokens it may still generate.
        self.budget: Optional[int] = None
        self.error: Optional[str] = None
        self._finalizer: Optional[weakref.finalize[[int], MaskdGrammar]] = None

    # -- state ----------------------------------------------------------------
    def synced(self) -> bool:
        return self.mask is not None and not self.unsent and self.unsent_rollback == 0

    def max_tokens_left(self) -> int:
        if not self.budget:
            return 0  # no budget mode
        return max(1, int(self.budget) - len(self.tokens))

    def _sync(self) -> None:
        """Brings the session to ``tokens`` now (one single-entry Step)."""
        self.backend.step([self], 0)

    # -- SGLang's interface -----------------------------------------------------
    def accept_token(self, token: int) -> None:
        """Queues ``token`` for the next Step after checking it against this state's
        mask; raises ValueError (what SGLang's scheduler catches) if it is not allowed.
        Tokens after an EOS are ignored, as SGLang's XGrammar backend does."""
        if self.is_terminated():
            return
        token = int(token)
        if not self.synced():
            self._sync()
        assert self.mask is not None
        if not _allowed(self.mask, token):
            raise ValueError(f"maskd: token {token} is not allowed after {len(self.tokens)} "
                             f"tokens ({self.dispatch_type} {self.key_string[:200]!r})"
                             + (f": {self.error}" if self.error else ""))
        self.current_token = token
        self.tokens.append(token)
        self.unsent.append(token)
        self.backend._dirty[id(self)] = self

    def rollback(self, k: int) -> None:
        k = min(int(k), len(self.tokens))
        if k <= 0:
            return
        del self.tokens[len(self.tokens) - k:]
        from_unsent = min(k, len(self.unsent))
        del self.unsent[len(self.unsent) - from_unsent:]
        self.unsent_rollback += k - from_unsent

    def is_terminated(self) -> bool:
        return bool(self.tokens) and self.tokens[-1] in self.backend.eos_set

    @property
    def finished(self) -> bool:
        return bool(self._finished)

    @finished.setter
    def finished(self, value: bool) -> None:
        self._finished = value
        if value:
            self.release()

    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return sglang_masks.allocate(vocab_size, batch_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        self.backend.fill([GrammarRow(row=idx, grammar=self)], vocab_mask)

    @staticmethod
    def fill_vocab_mask_batched(entries: List[Any], vocab_mask: torch.Tensor) -> None:
        """Every listed row in one Step per backend (SGLang has one backend)."""
        by_backend: Dict[int, Tuple[MaskdGrammarBackend, List[Any]]] = {}
        for e in entries:
            b = e.grammar.backend
            by_backend.setdefault(id(b), (b, []))[1].append(e)
        for backend, group in by_backend.values():
            backend.fill(group, vocab_mask)

    @staticmethod
    def reset_vocab_mask(vocab_mask: torch.Tensor) -> None:
        vocab_mask.fill_(-1)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return sglang_masks.move(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        sglang_masks.apply(logits, vocab_mask)

    def copy(self) -> "MaskdGrammar":
        """A new grammar at the start of the same index (no session until its first
        fill: the copies SGLang caches are never stepped)."""
        g = MaskdGrammar(self.backend, self.index_id, self.key_string, self.dispatch_type)
        if self.grammar_stats is not None:
            g.grammar_stats = GrammarStats(dispatch_type=self.dispatch_type, is_cache_hit=True)
        return g

    # -- jump-forward: maskd's Step reply carries the forced bytes -----------------
    def try_jump_forward(self, tokenizer: Any) -> Optional[Tuple[List[int], str]]:
        if self.is_terminated():
            return None
        if not self.synced():
            self._sync()
        text = _utf8_prefix(self.forced)
        return ([], text) if text else None

    def jump_forward_str_state(self, helper: Tuple[List[int], str]) -> Tuple[str, int]:
        return helper[1], -1

    def jump_and_retokenize(self, old_output_ids: List[int], new_output_ids: List[int],
                            next_state: int) -> None:
        """Undoes the tokens after the common prefix of the old and new output, then
        accepts the new ones (each checked against its mask)."""
        k = 0
        for a, b in zip(old_output_ids, new_output_ids):
            if a != b:
                break
            k += 1
        self.rollback(len(old_output_ids) - k)
        for t in new_output_ids[k:]:
            self.accept_token(t)

    # -- session lifetime -------------------------------------------------------
    def _attach(self, session_id: int) -> None:
        self.session_id = session_id
        self._finalizer = weakref.finalize(self, self.backend.close_later, session_id)

    def release(self) -> None:
        """Closes the session (in the background). Used again, the grammar re-creates
        one and replays its tokens."""
        if self.session_id is None:
            return
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self.backend.close_later(self.session_id)
        self.backend._dirty.pop(id(self), None)
        self.session_id = None
        self.unsent = list(self.tokens)
        self.unsent_rollback = 0
        self.mask = None

    def __repr__(self) -> str:
        return (f"MaskdGrammar({self.dispatch_type}, {self.index_id}, "
                f"tokens={len(self.tokens)}, session={self.session_id})")


class MaskdGrammarBackend(BaseGrammarBackend):
    """Compiles SGLang's constraints with maskd and steps their sessions.

    Args:
      tokenizer: SGLang's tokenizer (a Hugging Face fast tokenizer).
      vocab_size: the model's logits width (ids past the tokenizer are padding: masked).
      eos_token_ids: the ids that end a request (SGLang's model EOS ids).
      addr: the maskd address; default $MASKD_ADDR, else unix:///tmp/maskd.sock.
      client: a maskd.Client to use instead of connecting to ``addr``.
      timeout: seconds allowed to each maskd call.
      prefetch: send each scheduler step's Step early (``prefetch``), as soon as SGLang
        has processed the batch's results, instead of when it fills the next mask.
    """

    def __init__(self, tokenizer: Any, vocab_size: int,
                 eos_token_ids: Optional[Iterable[int]] = None, *,
                 addr: Optional[str] = None, client: Optional[Client] = None,
                 timeout: Optional[float] = 60.0, prefetch: bool = True) -> None:
        super().__init__()
        self.client = client if client is not None else Client(
            addr or os.environ.get("MASKD_ADDR") or DEFAULT_ADDR, timeout=timeout)
        self.vocab_size = int(vocab_size)
        self.eos_ids = sglang_tokenizer.eos_ids_of(tokenizer, eos_token_ids)
        self.eos_set = frozenset(self.eos_ids)
        self.tokenizer_name = sglang_tokenizer.register(self.client, tokenizer,
                                                        self.vocab_size, self.eos_ids)
        self._closer = ThreadPoolExecutor(1, thread_name_prefix="maskd-close")
        self._lock = threading.Lock()
        # Counters: Step RPCs sent and rows they carried (bench and tests read them).
        self.steps = 0
        self.step_rows = 0
        self.prefetched_rows = 0
        # prefetch(): grammars that accepted tokens since the last prefetch, and the
        # Step in flight (grammars, futures, words), which the next fill takes.
        self.prefetch_enabled = prefetch
        # Weak: a grammar SGLang drops is not kept alive here (its finalizer closes it).
        self._dirty: weakref.WeakValueDictionary[int, MaskdGrammar] = weakref.WeakValueDictionary()
        self._pending: Optional[Tuple[List[MaskdGrammar], List[StepFuture], int]] = None

    # -- compile ------------------------------------------------------------------
    def _compile(self, dispatch_type: str, key_string: str, **constraint: Any) -> BaseGrammarObject:
        try:
            r = self.client.compile(self.tokenizer_name, **constraint)
        except (MaskdError, ValueError) as e:
            logger.error("maskd: %s constraint rejected: %s", dispatch_type, e)
            return InvalidGrammarObject(f"maskd: {e}")
        return MaskdGrammar(self, r.index_id, key_string, dispatch_type)

    def dispatch_regex(self, key_string: str) -> BaseGrammarObject:
        return self._compile("regex", key_string, regex=key_string)

    def dispatch_json(self, key_string: str) -> BaseGrammarObject:
        # "$$ANY$$": any JSON value (SGLang's json_object response format).
        schema = "{}" if key_string == "$$ANY$$" else key_string
        return self._compile("json", key_string, json_schema=schema)

    def dispatch_ebnf(self, key_string: str) -> BaseGrammarObject:
        # SGLang's EBNF is XGrammar's (`root ::= ...`): maskd's "ebnf" format. maskd also
        # takes Lark there (`start: ...`; SGLang's request has no field of its own for it).
        return self._compile("ebnf", key_string,
                             grammar=Grammar(key_string, grammar_format(key_string)))

    def dispatch_structural_tag(self, key_string: str) -> BaseGrammarObject:
        try:
            doc = sglang_tags.to_maskd(key_string)
        except (ValueError, KeyError, TypeError) as e:
            logger.error("maskd: structural tag not supported: %s", e)
            return InvalidGrammarObject(f"maskd: {e}")
        return self._compile("structural_tag", key_string, structural_tag=doc)

    # -- steps --------------------------------------------------------------------
    def _ensure_sessions(self, grammars: Sequence[MaskdGrammar]) -> None:
        for g in grammars:
            if g.session_id is None:
                g._attach(self.client.create_session(g.index_id).session_id)
                g.unsent = list(g.tokens)  # replay whatever was accepted before
                g.unsent_rollback = 0

    def _launch(self, grammars: Sequence[MaskdGrammar], words: int) -> List[StepFuture]:
        """Sends the Step(s) for ``grammars`` without waiting. Their queued tokens and
        rollback are then in flight: cleared here, so that what they accept or roll
        back meanwhile is relative to the state the reply will describe (``mask`` is
        None until ``_finish``)."""
        self._ensure_sessions(grammars)
        futures = []
        for i in range(0, len(grammars), MAX_STEP_ROWS):
            chunk = grammars[i:i + MAX_STEP_ROWS]
            entries: List[EntryLike] = []
            for g in chunk:
                assert g.session_id is not None  # _ensure_sessions ran
                entries.append((g.session_id, g.unsent, g.unsent_rollback, g.max_tokens_left()))
            futures.append(self.client.step_async(entries, words))
        for g in grammars:
            g.unsent, g.unsent_rollback, g.mask = [], 0, None
        self.steps += len(futures)
        self.step_rows += len(grammars)
        return futures

    def _finish(self, grammars: Sequence[MaskdGrammar], futures: Sequence[StepFuture],
                words: int) -> None:
        """Takes the replies of ``_launch``: each grammar's mask and forced bytes. A
        session the server lost is re-created and replayed; another failed entry (or a
        failed Step) leaves its row allowing only EOS."""
        try:
            replies = [f.result() for f in futures]
        except MaskdError as e:
            logger.error("maskd: Step of %d rows failed: %s", len(grammars), e)
            self._eos_only(grammars, words, str(e))
            return
        masks = np.concatenate([r.masks for r in replies]) if len(replies) > 1 else replies[0].masks
        results = [res for r in replies for res in r.results]
        lost: List[MaskdGrammar] = []
        for j, (g, res) in enumerate(zip(grammars, results)):
            if res.status.code == grpc.StatusCode.NOT_FOUND.value[0]:
                g.session_id = None  # expired on the server: nothing of this Step applied
                if g._finalizer is not None:
                    g._finalizer.detach()
                    g._finalizer = None
                lost.append(g)
            elif res.status.code != 0:
                g.error = res.status.message
                logger.error("maskd: %r: %s", g, res.status.message)
                g.mask, g.forced = self._eos_row(masks.shape[1]), b""
            else:
                g.mask, g.forced = masks[j], res.forced
        if lost:
            self._step_now(lost, words)

    def _step_now(self, grammars: Sequence[MaskdGrammar], words: int) -> None:
        try:
            futures = self._launch(grammars, words)
        except MaskdError as e:  # a session could not be created
            logger.error("maskd: sessions for %d rows: %s", len(grammars), e)
            self._eos_only(grammars, words, str(e))
            return
        self._finish(grammars, futures, words)

    def _collect(self) -> None:
        """Waits for the prefetched Step, if one is in flight."""
        pending, self._pending = self._pending, None
        if pending is not None:
            self._finish(*pending)

    def prefetch(self) -> None:
        """Sends now, as one Step without waiting, the tokens every live grammar accepted
        since its last Step; the next fill (or accept) takes the reply. The plugin calls
        it after SGLang's scheduler has processed a batch's results, so that the round
        trip overlaps the scheduling and forward pass of the next batch."""
        if not self.prefetch_enabled:
            self._dirty.clear()
            return
        self._collect()
        dirty = list(self._dirty.values())
        self._dirty.clear()
        gs = [g for g in dirty
              if g.session_id is not None and not g.finished and not g.is_terminated()
              and (g.unsent or g.unsent_rollback)]
        if not gs:
            return
        words = sglang_masks.words_for(self.vocab_size)
        try:
            self._pending = (gs, self._launch(gs, words), words)
        except MaskdError as e:
            logger.error("maskd: prefetch of %d rows failed: %s", len(gs), e)
            self._eos_only(gs, words, str(e))
        self.prefetched_rows += len(gs)

    def step(self, grammars: Sequence[MaskdGrammar], words: int) -> np.ndarray:
        """Brings ``grammars`` in sync (the prefetched Step first, then one Step per
        MAX_STEP_ROWS for those still behind) and returns their masks, a
        (len(grammars), words) uint32 array (words 0: the tokenizer's width)."""
        grammars = list(grammars)
        self._collect()
        for g in grammars:
            self._dirty.pop(id(g), None)
        behind = [g for g in grammars if not g.synced()]
        if behind:
            self._step_now(behind, words)
        width = words or sglang_masks.words_for(self.vocab_size)
        eos = self._eos_row(width)
        rows = [eos if g.mask is None else g.mask for g in grammars]
        if all(r.shape[0] == width for r in rows):
            return np.stack(rows)
        out = np.zeros((len(rows), width), np.uint32)  # another width (a prefetched row)
        for j, r in enumerate(rows):
            n = min(width, r.shape[0])
            out[j, :n] = r[:n]
        return out

    def _eos_row(self, words: int) -> np.ndarray:
        row = np.zeros(words, np.uint32)
        for t in self.eos_ids:
            if (t >> 5) < words:
                row[t >> 5] |= np.uint32(1 << (t & 31))
        return row

    def _eos_only(self, grammars: Sequence[MaskdGrammar], words: int, why: str) -> None:
        row = self._eos_row(words or sglang_masks.words_for(self.vocab_size))
        for g in grammars:
            g.error = why
            g.mask, g.forced = row, b""
            g.unsent, g.unsent_rollback = [], 0

    def fill(self, entries: Sequence[Any], vocab_mask: torch.Tensor) -> None:
        """Writes the listed rows (GrammarRow(row, grammar)) of ``vocab_mask``: the
        prefetched Step's reply, one Step for the grammars still behind, the cached
        mask for those in sync; then one vectorised copy of all rows."""
        if not entries:
            return
        masks = self.step([e.grammar for e in entries], int(vocab_mask.shape[1]))
        sglang_masks.fill_rows(vocab_mask, [e.row for e in entries], masks)

    # -- SGLang's static mask helpers (the scheduler may call them on the backend) --
    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return sglang_masks.allocate(vocab_size, batch_size)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return sglang_masks.move(vocab_mask, device)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        sglang_masks.apply(logits, vocab_mask)

    # -- lifetime -----------------------------------------------------------------
    def close_later(self, session_id: int) -> None:
        try:
            self._closer.submit(self._close, session_id)
        except RuntimeError:  # interpreter shutting down: the server's TTL expires it
            pass

    def _close(self, session_id: int) -> None:
        try:
            self.client.close_session(session_id)
        except MaskdError as e:  # the server's --session-ttl expires it anyway
            logger.debug("maskd: closing session %d failed: %s", session_id, e)

    def reset(self) -> None:
        super().reset()

    def shutdown(self) -> None:
        """Waits for pending session closes; closes the channel."""
        self._closer.shutdown(wait=True)
        self.client.close()


# -- the SGLang plugin ---------------------------------------------------------------
def create_backend(server_args: Any, tokenizer: Any, vocab_size: int,
                   eos_token_ids: Optional[Iterable[int]] = None) -> MaskdGrammarBackend:
    """SGLang's grammar-backend factory signature (register_grammar_backend)."""
    return MaskdGrammarBackend(tokenizer, vocab_size, eos_token_ids)


def _set_budget(result: Any, manager: Any, req: Any, *args: Any, **kwargs: Any) -> None:
    """After GrammarManager._apply_request_reasoning_config(req), which SGLang calls once
    a request's grammar is ready (cache hit or compiled): give a maskd grammar the
    request's max_new_tokens."""
    g = getattr(req, "grammar", None)
    if isinstance(g, MaskdGrammar):
        g.budget = getattr(getattr(req, "sampling_params", None), "max_new_tokens", None)


def prefetch_after_results(result: Any, scheduler: Any, *args: Any, **kwargs: Any) -> None:
    """After Scheduler.process_batch_result (every sampled token of the batch accepted,
    finished requests marked): send the next Step now (MaskdGrammarBackend.prefetch)."""
    backend = getattr(getattr(scheduler, "grammar_manager", None), "grammar_backend", None)
    if isinstance(backend, MaskdGrammarBackend):
        backend.prefetch()


_PREFETCH_HOOK_TARGET = "sglang.srt.managers.scheduler.Scheduler.process_batch_result"
_BUDGET_HOOK_TARGET = ("sglang.srt.constrained.grammar_manager.GrammarManager."
                       "_apply_request_reasoning_config")


def register_plugin() -> None:
    """The ``sglang.srt.plugins`` entry point: adds ``maskd`` to --grammar-backend,
    registers the backend, and hooks the budget and the prefetch. Idempotent."""
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
    from sglang.srt.constrained.base_grammar_backend import (GRAMMAR_BACKEND_REGISTRY,
                                                             register_grammar_backend)
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    if BACKEND_NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([BACKEND_NAME])
    if GRAMMAR_BACKEND_REGISTRY.get(BACKEND_NAME) is not create_backend:
        register_grammar_backend(BACKEND_NAME, create_backend)
        HookRegistry.register(_BUDGET_HOOK_TARGET, _set_budget, HookType.AFTER)
        HookRegistry.register(_PREFETCH_HOOK_TARGET, prefetch_after_results, HookType.AFTER)
