"""vLLM: maskd as vLLM's structured-output backend (docs/engines.md, "vLLM").

Users change one setting: the environment variable ``MASKD_VLLM_ADDR`` (a maskd address,
``unix:///run/maskd.sock``), seen by every vLLM process. The package's ``vllm.general_plugins``
entry point (maskd.integrations._vllm_plugin) then routes every structured-output request to
``MaskdBackend`` below; requests keep using ``StructuredOutputsParams`` / ``response_format``.

Batching. vLLM calls the grammar objects one request at a time (``accept_tokens`` after
sampling, ``fill_bitmask`` while the next forward pass runs). ``accept_tokens`` checks the
tokens against the mask it already holds and only records them; the first ``fill_bitmask``
of an engine step that needs a mask sends ONE Step for every request whose state changed
(the tokens each accepted, rollbacks, budgets), and every later ``fill_bitmask`` of that
step copies its row from that reply. Masks are copied as packed words into vLLM's int32
bitmask rows (no bool arrays).

State model, per request (``MaskdGrammar``): ``_tokens`` is what vLLM has accepted (the
logical state); ``_server`` is what the maskd session has accepted; ``_common`` is the length
of their common prefix; ``_masks[n]`` is the session's mask after ``_server[:n]``. A Step
entry ``(rollback=len(_server)-_common, tokens=_tokens[_common:])`` makes the session equal
to the logical state. Speculative decoding (``validate_tokens``, ``rollback``) moves only
the logical state inside ``_server``'s path, so the masks computed while validating draft
tokens are reused by vLLM's per-draft ``fill_bitmask`` calls and rollback costs no call.
"""
from __future__ import annotations

import collections
import concurrent.futures
import dataclasses
import hashlib
import json
import logging
import threading
import time
import weakref
from typing import Any, Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

import numpy as np
import torch
from vllm.v1.structured_output.backend_types import (StructuredOutputBackend,
                                                     StructuredOutputGrammar,
                                                     StructuredOutputOptions)

from maskd._common import Grammar, MaskdError, StepReply, status_code
from maskd.client import Client
from maskd.integrations._core import constraint_kwargs

log = logging.getLogger("maskd.vllm")

# A Step entry's rollback must stay within the server's --rollback-window (4096 by
# default); a longer one (reset() of a long request) re-creates the session instead.
_MAX_ROLLBACK = 4000

_registered: Dict[Tuple[str, str], str] = {}  # (addr, name) -> name, per process
_registered_lock = threading.Lock()


def tokenizer_json_bytes(tokenizer: Any) -> bytes:
    """The tokenizer.json document of vLLM's (Hugging Face fast) tokenizer."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None and hasattr(backend, "to_str"):
        return str(backend.to_str()).encode()
    raise TypeError(f"maskd's vLLM backend needs a Hugging Face fast tokenizer (tokenizer.json); "
                    f"got {type(tokenizer).__name__}")


def _allowed(row: np.ndarray, token: int) -> bool:
    w = token >> 5
    return 0 <= token and w < row.shape[0] and bool((int(row[w]) >> (token & 31)) & 1)


def _lark_or_ebnf(text: str) -> List[Grammar]:
    """The grammar formats to try, in order: vLLM sends Lark, or XGrammar's EBNF (GBNF as a
    fallback: the two agree where both parse, but EBNF refuses GBNF's ``.``)."""
    from vllm.v1.structured_output.utils import grammar_is_likely_lark
    if grammar_is_likely_lark(text):
        return [Grammar(text, "lark")]
    return [Grammar(text, "ebnf"), Grammar(text, "gbnf")]


def _structural_tag(spec: str) -> Any:
    """vLLM's structural tag document as maskd's (docs/grammars.md, "Structural tags")."""
    doc = json.loads(spec)
    if isinstance(doc, dict) and "structures" in doc:
        return {"tags": [{"begin": s["begin"], "schema": s["schema"], "end": s["end"]}
                         for s in doc["structures"]],
                "triggers": list(doc.get("triggers", []))}
    return doc  # maskd's own form; XGrammar's newer "format" documents are refused by maskd


def request_constraints(request_type: StructuredOutputOptions, spec: str) -> List[Dict[str, Any]]:
    """Compile keyword arguments for one vLLM request, alternatives in order of preference."""
    t = request_type
    if t == StructuredOutputOptions.JSON:
        return [constraint_kwargs(json_schema=spec)]
    if t == StructuredOutputOptions.JSON_OBJECT:
        return [constraint_kwargs(json_schema='{"type": "object"}')]
    if t == StructuredOutputOptions.REGEX:
        return [constraint_kwargs(regex=spec)]
    if t == StructuredOutputOptions.CHOICE:
        choices = json.loads(spec)
        if not isinstance(choices, list):
            choices = [choices]
        return [constraint_kwargs(choices=[str(c) for c in choices])]
    if t == StructuredOutputOptions.GRAMMAR:
        return [constraint_kwargs(grammar=g) for g in _lark_or_ebnf(spec)]
    if t == StructuredOutputOptions.STRUCTURAL_TAG:
        return [constraint_kwargs(structural_tag=_structural_tag(spec))]
    raise ValueError(f"maskd: unsupported structured output type {t!r}")


@dataclasses.dataclass
class MaskdBackend(StructuredOutputBackend):
    """vLLM's engine-level backend over one maskd server (``addr``).

    ``vocab_size`` is the model's logits width; bitmask rows are ceil(vocab_size / 32) int32
    words, ids past the tokenizer's masked (maskd registers the tokenizer with that width).
    """

    addr: str = ""
    # Draft tokens per step (speculative decoding); None: vLLM's config says.
    spec_tokens: Optional[int] = None
    is_maskd = True  # what the plugin checks, without importing this module

    def __post_init__(self) -> None:
        if not self.addr:
            raise ValueError("MaskdBackend needs addr (MASKD_VLLM_ADDR)")
        self.client = Client(self.addr, client_name="vllm")  # per-engine server metrics
        self._json = tokenizer_json_bytes(self.tokenizer)
        n_ids = int(getattr(self.tokenizer, "max_token_id", len(self.tokenizer) - 1)) + 1
        # maskd's width: the logits width, or the tokenizer's if wider (masks are cut to
        # the bitmask's width when copied).
        self.width = max(int(self.vocab_size), n_ids)
        self.words = (int(self.vocab_size) + 31) // 32
        self._digest = hashlib.sha256(self._json).hexdigest()[:16]
        self._default_eos = sorted(int(t) for t in (getattr(self.tokenizer, "eos_token_id", None),)
                                   if t is not None)
        if self.spec_tokens is None:
            spec = getattr(self.vllm_config, "speculative_config", None)
            self.spec_tokens = int(getattr(spec, "num_speculative_tokens", 0) or 0)
        # Masks a request keeps below its position: the ones vLLM's per-draft fills and
        # rollbacks may come back to. Each is a view of a Step reply and keeps that reply
        # alive, so more would hold more replies (a miss only costs a Step).
        self.keep_behind = self.spec_tokens + 1
        self.lock = threading.RLock()  # guards every grammar's state and the dirty set
        self._dirty: "weakref.WeakValueDictionary[int, MaskdGrammar]" = \
            weakref.WeakValueDictionary()
        # Sessions of grammars vLLM dropped, to close (appended by weakref finalizers).
        self._retired: "collections.deque[int]" = collections.deque()
        self._closer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="maskd-close")
        self._views: Dict[int, np.ndarray] = {}
        # Counters (read by benchmarks and tests): batched Step calls (all requests whose
        # state changed); Step calls for one request (validate_tokens, accept_tokens without
        # a mask); seconds the engine waited for replies (first masks at compile excluded),
        # and spent handing early Steps over (prefetch).
        self.steps = 0
        self.solo_steps = 0
        self.step_s = 0.0
        self.send_s = 0.0
        self.prefetched = 0  # batched Steps sent early (prefetch), counted in steps too
        self._inflight: Optional[Tuple[List[MaskdGrammar],
                                       "concurrent.futures.Future[StepReply]"]] = None
        self._sender = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="maskd-step")
        # Its thread starts now: an executor starts its thread on the first submit, which
        # would otherwise be the first engine step's prefetch, on the engine's path.
        self._sender.submit(lambda: None).result()

    # -- tokenizer ------------------------------------------------------------
    def tokenizer_name(self, stop_ids: Sequence[int]) -> str:
        """The maskd tokenizer of this model with ``stop_ids`` as its EOS ids, registered
        once per process (name: digests of the tokenizer.json bytes and of the stop ids)."""
        stops = sorted(set(int(t) for t in stop_ids)) or self._default_eos
        sd = hashlib.sha256(json.dumps([stops, self.width]).encode()).hexdigest()[:8]
        name = f"vllm-{self._digest}-{sd}"
        key = (self.addr, name)
        with _registered_lock:
            if key not in _registered:
                self.client.register_tokenizer(name, self._json, vocab_size=self.width,
                                               eos_ids=stops)
                _registered[key] = name
        return name

    # -- StructuredOutputBackend ---------------------------------------------
    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: Optional[Set[int]] = None,
                        max_tokens: Optional[int] = None) -> "MaskdGrammar":
        """Compiles (maskd caches it) and opens a session, with its first mask. Runs on
        vLLM's compile threads. ``max_tokens``: the request's budget (the plugin passes
        it; vLLM's own call does not)."""
        stops = sorted(stop_token_ids) if stop_token_ids else []
        name = self.tokenizer_name(stops)
        options = request_constraints(request_type, grammar_spec)
        err: Optional[MaskdError] = None
        for kw in options:
            try:
                created = self.client.create_session(tokenizer=name, **kw)
                break
            except MaskdError as e:
                err = err or e
        else:
            assert err is not None
            raise err
        g = MaskdGrammar(self, created.session_id, created.index_id,
                         frozenset(stops or self._default_eos), max_tokens)
        self.step([g])  # the first mask: here (a compile thread), not on the engine's step
        if g._broken is not None:
            raise MaskdError(status_code(13), f"maskd: first mask: {g._broken}")
        return g

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, self.words), -1, dtype=torch.int32)

    def destroy(self) -> None:
        """Closes the sessions of dropped requests and the channel (idempotent)."""
        with self.lock:
            self._collect()
        self._sender.shutdown(wait=True)
        self._closer.shutdown(wait=True)
        self._close_retired()
        self.client.close()

    # -- the per-step collector -----------------------------------------------
    def mark(self, g: "MaskdGrammar") -> None:
        self._dirty[id(g)] = g

    def retire(self, sid: int) -> None:
        self._retired.append(sid)

    def _close_retired(self) -> None:
        sids: List[int] = []
        while self._retired:
            sids.append(self._retired.popleft())
        if not sids:
            return
        try:
            self._closer.submit(self._close_sessions, sids)
        except RuntimeError:  # shut down (destroy, interpreter exit): close them here
            self._close_sessions(sids)

    def _close_sessions(self, sids: List[int]) -> None:
        for sid in sids:
            try:
                self.client.close_session(sid)
            except (MaskdError, ValueError):
                pass  # expired, server gone, or channel closed (ValueError): nothing to free

    def prefetch(self) -> None:
        """Sends the Step of the coming engine step now, without waiting: the plugin calls
        it when vLLM has accepted the step's sampled tokens (end of update_from_output), so
        the call runs while vLLM schedules and runs the forward pass; the first fill_bitmask
        (or any change to a request in it) collects the reply."""
        t0 = time.perf_counter()
        with self.lock:
            self._collect()
            todo = self._todo()
            if todo:
                # A thread of our own makes the call: handing it over costs ~0.1 ms, where
                # gRPC's own future API cost 1-3 ms on the caller's thread (measured).
                entries = [g._entry() for g in todo]
                self._inflight = (todo, self._sender.submit(self.client.step, entries))
                self.prefetched += 1
        self.send_s += time.perf_counter() - t0  # building and handing over: engine's path

    def _todo(self) -> List["MaskdGrammar"]:
        """The requests whose mask is not known, ready for a Step entry (lock held)."""
        todo = [g for g in list(self._dirty.values()) if g._needs_step()]
        self._dirty.clear()
        for g in todo:
            if len(g._server) - g._common > _MAX_ROLLBACK:
                g._renew_session()
        return todo

    def _collect(self) -> None:
        """Applies the prefetched Step's reply, waiting for it if needed (lock held). Every
        change to a request's state collects first, so a reply always answers the state
        its entries were built from."""
        if self._inflight is None:
            return
        todo, fut = self._inflight
        self._inflight = None
        t0 = time.perf_counter()
        try:
            reply: Optional[StepReply] = fut.result()
            err = None
        except MaskdError as e:
            reply, err = None, e
        self.step_s += time.perf_counter() - t0  # only the wait is on the engine's path
        self.steps += 1
        self._apply(todo, reply, err)

    def flush(self) -> None:
        """One Step for every request whose mask is not known (lock held by the caller)."""
        self._collect()
        todo = self._todo()
        if todo:
            t0 = time.perf_counter()
            self.step(todo)
            self.steps += 1
            self.step_s += time.perf_counter() - t0
        self._close_retired()

    def step(self, grammars: Sequence["MaskdGrammar"]) -> None:
        """Brings each grammar's session to its logical state and stores the masks."""
        entries = [g._entry() for g in grammars]
        try:
            self._apply(grammars, self.client.step(entries), None)
        except MaskdError as e:
            self._apply(grammars, None, e)

    def _apply(self, grammars: Sequence["MaskdGrammar"], reply: Optional[StepReply],
               err: Optional[MaskdError]) -> None:
        if reply is None:
            log.error("maskd Step for %d vLLM requests failed: %s", len(grammars), err)
            for g in grammars:
                g._broken = str(err)
            return
        for j, g in enumerate(grammars):
            r = reply.results[j]
            if r.status.code != 0:
                g._broken = f"{status_code(r.status.code).name}: {r.status.message}"
                log.error("maskd: session %d: %s", g.sid, g._broken)
                continue
            g._synced(reply.masks[j])

    def view(self, bitmask: torch.Tensor) -> Optional[np.ndarray]:
        """vLLM's (CPU, int32) bitmask as a NumPy view, cached per tensor."""
        if bitmask.device.type != "cpu":
            return None
        key = bitmask.data_ptr()
        v = self._views.get(key)
        if v is None or v.shape != tuple(bitmask.shape):
            v = self._views[key] = bitmask.numpy()
        return v


class MaskdGrammar(StructuredOutputGrammar):
    """One vLLM request's maskd session (see the module doc for the state model).
    Every method runs under the backend's lock: vLLM fills rows from several threads
    above 128 requests."""

    def __init__(self, backend: MaskdBackend, sid: int, index_id: str, stops: FrozenSet[int],
                 max_tokens: Optional[int]):
        self.backend = backend
        self.sid = sid
        self.index_id = index_id
        self.stops = stops
        self.max_tokens = max_tokens if max_tokens and max_tokens > 0 else None
        self._tokens: List[int] = []
        self._server: List[int] = []
        self._common = 0
        self._masks: Dict[int, np.ndarray] = {}
        self._term_at: Optional[int] = None  # len(_tokens) just after a stop token
        self._broken: Optional[str] = None  # why the session failed; the request then ends
        self._finalizer = weakref.finalize(self, backend.retire, sid)

    # -- state helpers (backend.lock held) ------------------------------------
    def _cached(self) -> Optional[np.ndarray]:
        n = len(self._tokens)
        return self._masks.get(n) if self._common == n else None

    def _needs_step(self) -> bool:
        return self._broken is None and self._term_at is None and self._cached() is None

    def _entry(self) -> Tuple[int, List[int], int, int]:
        c = self._common
        left = max(1, self.max_tokens - len(self._tokens)) if self.max_tokens else 0
        return (self.sid, self._tokens[c:], len(self._server) - c, left)

    def _synced(self, row: np.ndarray) -> None:
        c, n = self._common, len(self._tokens)
        del self._server[c:]
        self._server.extend(self._tokens[c:])
        for k in [k for k in self._masks if k > c or k < n - self.backend.keep_behind]:
            del self._masks[k]
        self._masks[n] = row  # a read-only view of the reply (kept alive by it)
        self._common = n

    def _renew_session(self) -> None:
        """A fresh session at the start (a rollback past the server's window)."""
        old = self.sid
        self.sid = self.backend.client.create_session(self.index_id).session_id
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, self.backend.retire, self.sid)
        self.backend.retire(old)
        self._server, self._common = [], 0
        self._masks = {k: v for k, v in self._masks.items() if k == 0}

    def _sync_alone(self) -> np.ndarray:
        """The mask at the logical state, with a Step for this request alone if needed."""
        row = self._cached()
        if row is None and self._broken is None:
            t0 = time.perf_counter()
            self.backend.step([self])
            self.backend.solo_steps += 1
            self.backend.step_s += time.perf_counter() - t0
            row = self._cached()
        if row is None:
            raise MaskdError(status_code(13), f"maskd session {self.sid}: {self._broken}")
        return row

    def _push(self, t: int) -> None:
        n = len(self._tokens)
        self._tokens.append(t)
        if self._common == n and n < len(self._server) and self._server[n] == t:
            self._common = n + 1
        if t in self.stops:
            self._term_at = n + 1

    def _pop(self, k: int) -> None:
        n = len(self._tokens) - k
        del self._tokens[n:]
        self._common = min(self._common, n)
        if self._term_at is not None and self._term_at > n:
            self._term_at = None

    # -- StructuredOutputGrammar ----------------------------------------------
    def accept_tokens(self, request_id: str, tokens: List[int]) -> bool:
        with self.backend.lock:
            self.backend._collect()
            if self._term_at is not None:
                return True  # tokens after the end are not the constraint's (as XGrammar)
            for t in tokens:
                try:
                    row = self._sync_alone()
                except MaskdError as e:
                    log.error("maskd: request %s: %s", request_id, e)
                    return False
                if not _allowed(row, int(t)):
                    log.error("maskd: request %s: token %d not allowed", request_id, t)
                    return False
                self._push(int(t))
                if self._term_at is not None:
                    break
            if self._cached() is None:
                self.backend.mark(self)
            return True

    def validate_tokens(self, tokens: List[int]) -> List[int]:
        with self.backend.lock:
            self.backend._collect()
            if self._term_at is not None:
                return []
            ok: List[int] = []
            try:
                for t in tokens:
                    if not _allowed(self._sync_alone(), int(t)):
                        break
                    self._push(int(t))
                    ok.append(int(t))
                    if self._term_at is not None:
                        break
            except MaskdError as e:
                log.error("maskd: validate_tokens: %s", e)
            self._pop(len(ok))
            return ok

    def rollback(self, num_tokens: int) -> None:
        with self.backend.lock:
            self.backend._collect()
            if num_tokens > len(self._tokens):
                raise ValueError(f"rollback of {num_tokens} tokens past the start "
                                 f"({len(self._tokens)} accepted)")
            self._pop(num_tokens)
            if self._cached() is None:
                self.backend.mark(self)

    def fill_bitmask(self, bitmask: torch.Tensor, idx: int) -> None:
        b = self.backend
        with b.lock:
            row = self._cached()
            if row is None and self._broken is None:
                b.mark(self)
                b.flush()
                row = self._cached()
            if row is None:
                row = self._stops_only()
            out = b.view(bitmask)
            w = min(row.shape[0], bitmask.shape[1])
            if out is not None:
                out[idx, :w] = row[:w].view(np.int32)
                out[idx, w:] = 0
            else:
                bitmask[idx].zero_()
                bitmask[idx, :w].copy_(torch.from_numpy(row[:w].view(np.int32).copy()))

    def _stops_only(self) -> np.ndarray:
        """A broken session's row: only its stop tokens, so the request ends (and the next
        accept_tokens returns False: vLLM then finishes it with an error)."""
        row = np.zeros(self.backend.words, np.uint32)
        for t in self.stops:
            if t >> 5 < row.shape[0]:
                row[t >> 5] |= np.uint32(1 << (t & 31))
        return row

    def is_terminated(self) -> bool:
        return self._term_at is not None

    def reset(self) -> None:
        with self.backend.lock:
            self.backend._collect()
            self._pop(len(self._tokens))
            self._broken = None
            if self._cached() is None:
                self.backend.mark(self)
