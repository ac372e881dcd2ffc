"""Sessions that survive a maskd restart (the Python twin of ``maskd::ResumableSession``).

maskd keeps sessions in memory only: after a SIGKILL or an OOM kill a restarted maskd
serves the same index ids, but every session id answers NOT_FOUND. A mask depends only
on (constraint, tokenizer, tokens), so a ``ResumableSession`` remembers its constraint
(the ``CompileRequest``) and the tokens the server confirmed; when a call finds its
session gone (NOT_FOUND) or the server unreachable (UNAVAILABLE) it waits for health
SERVING, creates a new session at the same constraint, replays the confirmed tokens in
one Step (chunks of ``replay_chunk_tokens``) and redoes the call.

    s = ResumableSession.create(client, "qwen3", regex="[a-z]+")
    reply = s.step()                       # first mask
    reply = s.step([token])                # each step: the tokens accepted since the last
    replies = step_resumable([(s1, [t1]), (s2, [t2])])   # a batch: one Step when all is well

Rules that keep masks exact: the local token list changes only when the server confirmed
a step or rollback; after a transport error the old session is abandoned (never stepped
again: the lost call may or may not have been applied). When the server does not come
back within ``recovery_timeout`` / ``max_attempts`` a call raises
``MaskdError(UNAVAILABLE, "...: maskd did not come back (N attempts in T s): ...")`` and
changes nothing. One decoding loop owns a session (not thread-safe); the Client under it
is shared.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Callable, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

import grpc
import numpy as np

from maskd import _health_pb2 as health_pb
from maskd._common import MaskdError, StepReply, compile_request
from maskd.client import _HEALTH_STATUS, Client
from maskd.v1 import maskd_pb2 as pb

T = TypeVar("T")

_NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]


@dataclasses.dataclass(frozen=True)
class ResumeOptions:
    """Bounds of one call's recovery (defaults as the C++ ``maskd::ResumeOptions``).

    recovery_timeout: seconds one call may spend reconnecting, re-creating and replaying.
    max_attempts: attempts per call. initial_backoff / max_backoff: seconds between
    attempts, doubling. replay_chunk_tokens: tokens per replay Step (keep it under the
    server's --max-request-tokens).
    """

    recovery_timeout: float = 30.0
    max_attempts: int = 50
    initial_backoff: float = 0.02
    max_backoff: float = 1.0
    replay_chunk_tokens: int = 65536


class _Lost(Exception):
    """An attempt found the session gone (``wait``: back off before the next one)."""

    def __init__(self, err: MaskdError, wait: bool):
        self.err, self.wait = err, wait


def _transport_loss(code: grpc.StatusCode, recovering: bool) -> bool:
    return code == grpc.StatusCode.UNAVAILABLE or (
        recovering and code == grpc.StatusCode.DEADLINE_EXCEEDED)


class ResumableSession:
    """A maskd session that is re-created and replayed when the server loses it.

    Build it with ``create`` (or from a ``CompileRequest``). ``tokens`` are the tokens
    the server confirmed, ``session_id`` the live server id (changes on each resume),
    ``resumes`` how many times it was resumed.
    """

    def __init__(self, client: Client, compile: pb.CompileRequest,
                 options: ResumeOptions = ResumeOptions(), *, _tokens: Sequence[int] = ()):
        self.client = client
        self.compile = pb.CompileRequest()
        self.compile.CopyFrom(compile)
        self.options = options
        self.session_id = 0  # 0: none (lost, or not created yet)
        self.index_id = ""
        self.words_per_row = 0
        self.resumes = 0
        self._tokens: List[int] = [int(t) for t in _tokens]
        self._closed = False
        # session_id == 0: the recovery loop creates it, retrying while unreachable.
        try:
            self._with_recovery("CreateSession", lambda deadline, recovering: None)
        except BaseException:
            self._closed = True
            raise

    @classmethod
    def create(cls, client: Client, tokenizer: str, *, regex: Optional[str] = None,
               json_schema: Union[str, dict, None] = None, eager: bool = False,
               options: ResumeOptions = ResumeOptions()) -> "ResumableSession":
        """A session at the start of ``regex`` / ``json_schema`` for ``tokenizer``."""
        return cls(client, compile_request(tokenizer, regex=regex, json_schema=json_schema,
                                           eager=eager), options)

    @property
    def tokens(self) -> Tuple[int, ...]:
        """The tokens the server confirmed, in order."""
        return tuple(self._tokens)

    # -- recovery -------------------------------------------------------------
    def _timeout(self, deadline: Optional[float]) -> Optional[float]:
        t = self.client.timeout
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            t = left if t is None else min(t, left)
        return t

    def _call(self, fn: Callable[..., T], req, deadline: Optional[float], recovering: bool) -> T:
        # While recovering, wait for the channel to reconnect instead of failing at once.
        try:
            return fn(req, timeout=self._timeout(deadline), wait_for_ready=recovering or None)
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None

    def _with_recovery(self, what: str, attempt: Callable[[Optional[float], bool], T]) -> T:
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, f"{what}: session closed")
        o = self.options
        start = time.monotonic()
        deadline: Optional[float] = None  # set at the first loss
        backoff = o.initial_backoff
        last = ""
        attempts = 0
        recovering = False
        while attempts < o.max_attempts:
            attempts += 1
            wait = False
            if self.session_id == 0:
                recovering = True
                if deadline is None:
                    deadline = start + o.recovery_timeout
                try:
                    self._recreate(deadline)
                except MaskdError as e:
                    if e.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        raise
                    last, wait = str(e), True
            if self.session_id != 0:
                try:
                    return attempt(deadline, recovering)
                except _Lost as lost:
                    last, wait = str(lost.err), lost.wait
                    self.session_id = 0  # abandoned: never stepped again
                    recovering = True
                    if deadline is None:
                        deadline = time.monotonic() + o.recovery_timeout
            now = time.monotonic()
            assert deadline is not None
            if now >= deadline:
                break
            if wait:
                time.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, o.max_backoff)
        raise MaskdError(grpc.StatusCode.UNAVAILABLE,
                         f"{what}: maskd did not come back ({attempts} attempts in "
                         f"{time.monotonic() - start:.3f} s): {last}")

    def _recreate(self, deadline: float) -> None:
        # A restarted maskd accepts connections before its tokenizers are loaded
        # (NOT_SERVING; CreateSession would say "unknown tokenizer"): wait for SERVING.
        h = self._call(self.client._health, health_pb.HealthCheckRequest(), deadline, True)
        if h.status != health_pb.HealthCheckResponse.SERVING:
            raise MaskdError(grpc.StatusCode.UNAVAILABLE, f"maskd is {_HEALTH_STATUS.get(h.status, h.status)}")
        stub = self.client._stub
        created = self._call(stub.CreateSession, pb.CreateSessionRequest(compile=self.compile),
                             deadline, True)
        sid = created.session_id
        chunk = max(1, self.options.replay_chunk_tokens)
        for at in range(0, len(self._tokens), chunk):
            req = pb.StepRequest()
            req.entries.add(session_id=sid).tokens.extend(self._tokens[at:at + chunk])
            r = self._call(stub.Step, req, deadline, True).results[0].status
            if r.code == _NOT_FOUND:
                raise MaskdError(grpc.StatusCode.UNAVAILABLE, "session lost during replay")
            if r.code != 0:
                # Tokens this constraint accepted before are refused only if the tokenizer changed.
                raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"resume: the server refused the replayed tokens {at}.."
                                 f"{at + min(chunk, len(self._tokens) - at)} (tokenizer changed?): "
                                 f"{r.message}")
        first = self.index_id == ""
        self.session_id = sid
        self.index_id = created.index_id
        self.words_per_row = created.words_per_row
        if not first:
            self.resumes += 1

    def _rpc(self, fn: Callable[..., T], req, deadline: Optional[float], recovering: bool) -> T:
        """One call on the live session; NOT_FOUND or a transport error raise _Lost."""
        try:
            return self._call(fn, req, deadline, recovering)
        except MaskdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                raise _Lost(e, wait=False) from None
            if _transport_loss(e.code, recovering):
                raise _Lost(e, wait=True) from None
            raise

    def _commit(self, rollback: int, tokens: Sequence[int]) -> None:
        if rollback:
            del self._tokens[max(0, len(self._tokens) - rollback):]
        self._tokens.extend(int(t) for t in tokens)

    # -- calls ----------------------------------------------------------------
    def _step_once(self, tokens: List[int], rollback: int, words_per_row: int,
                   max_tokens_left: int, deadline: Optional[float], recovering: bool) -> pb.StepResponse:
        req = pb.StepRequest(words_per_row=words_per_row)
        req.entries.add(session_id=self.session_id, rollback=rollback,
                        max_tokens_left=max_tokens_left).tokens.extend(tokens)
        resp = self._rpc(self.client._stub.Step, req, deadline, recovering)
        code = resp.results[0].status.code
        if code == _NOT_FOUND:
            raise _Lost(MaskdError(grpc.StatusCode.NOT_FOUND, resp.results[0].status.message), wait=False)
        if code == 0:
            self._commit(rollback, tokens)
        return resp

    def _step_proto(self, tokens: Sequence[int], rollback: int, words_per_row: int,
                    max_tokens_left: int) -> pb.StepResponse:
        toks = [int(t) for t in tokens]
        return self._with_recovery("Step", lambda d, r: self._step_once(
            toks, rollback, words_per_row, max_tokens_left, d, r))

    def step(self, tokens: Sequence[int] = (), rollback: int = 0, words_per_row: int = 0,
             max_tokens_left: int = 0) -> StepReply:
        """One Step of this session: ``tokens`` accepted since the previous step (after
        undoing ``rollback``). An entry error (FAILED_PRECONDITION for a token not allowed,
        ...) is in ``reply.results[0]`` and changes nothing; raises MaskdError
        (UNAVAILABLE) when the server does not come back."""
        return StepReply.from_proto(self._step_proto(tokens, rollback, words_per_row, max_tokens_left))

    def rollback(self, n: int) -> int:
        """Undoes the last ``n`` confirmed tokens; returns the tokens left."""
        if n > len(self._tokens):
            raise MaskdError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"rollback of {n} tokens past the start ({len(self._tokens)} accepted)")

        def attempt(deadline: Optional[float], recovering: bool) -> int:
            self._rpc(self.client._stub.Rollback,
                      pb.RollbackRequest(session_id=self.session_id, num_tokens=n), deadline, recovering)
            self._commit(n, ())
            return len(self._tokens)

        return self._with_recovery("Rollback", attempt)

    def fork(self) -> "ResumableSession":
        """A new resumable session in the same state, with its own copy of the tokens
        (created at the constraint and replayed: it works on a restarted server too)."""
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, "Fork: session closed")
        return ResumableSession(self.client, self.compile, self.options, _tokens=self._tokens)

    def close(self) -> None:
        """Closes the server session (one already gone is not an error)."""
        if self._closed:
            return
        self._closed = True
        sid, self.session_id = self.session_id, 0
        if sid:
            try:
                self.client.close_session(sid)
            except MaskdError as e:
                if e.code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise

    def __enter__(self) -> "ResumableSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# One batch entry: (session, tokens[, rollback[, max_tokens_left]]).
ResumableEntry = Union[Tuple[ResumableSession, Sequence[int]],
                       Tuple[ResumableSession, Sequence[int], int],
                       Tuple[ResumableSession, Sequence[int], int, int]]


def _entries(entries: Iterable[ResumableEntry]) -> List[Tuple[ResumableSession, List[int], int, int]]:
    ents = [(e[0], [int(t) for t in e[1]], int(e[2]) if len(e) > 2 else 0,
             int(e[3]) if len(e) > 3 else 0) for e in entries]
    if ents and any(s.client is not ents[0][0].client for s, *_ in ents):
        raise ValueError("step_resumable: every session must use the same Client")
    return ents


class ResumableStepFuture:
    """A batch Step in flight (``step_resumable_async``); ``result()`` finishes it, resuming
    lost sessions as ``step_resumable`` does."""

    def __init__(self, entries: Iterable[ResumableEntry], words_per_row: int = 0):
        self._ents = _entries(entries)
        self._wpr = words_per_row
        self._fut: Optional[grpc.Future] = None
        if self._ents and all(s.session_id != 0 and not s._closed for s, *_ in self._ents):
            req = pb.StepRequest(words_per_row=words_per_row)
            for s, toks, rb, left in self._ents:
                req.entries.add(session_id=s.session_id, rollback=rb,
                                max_tokens_left=left).tokens.extend(toks)
            client = self._ents[0][0].client
            self._fut = client._stub.Step.future(req, timeout=client.timeout)

    def cancel(self) -> None:
        """Drops the call. Its sessions are abandoned (the server may have applied it) and
        resumed by their next call."""
        if self._fut is not None:
            self._fut.cancel()
            self._fut = None
            for s, *_ in self._ents:
                s.session_id = 0

    def result(self) -> StepReply:
        """The reply: one row per entry, in order (raises MaskdError UNAVAILABLE when the
        server does not come back)."""
        ents = self._ents
        if not ents:
            return StepReply([], np.zeros((0, 0), np.uint32), 0)
        results: List[Optional[pb.StepResult]] = [None] * len(ents)
        rows: List[bytes] = [b""] * len(ents)
        wprs: List[int] = [0] * len(ents)
        fut, self._fut = self._fut, None
        if fut is not None:
            try:
                resp = fut.result()
            except grpc.RpcError as e:
                err = MaskdError.from_rpc(e)
                if not _transport_loss(err.code, False):
                    raise err from None
                for s, *_ in ents:
                    s.session_id = 0  # abandoned: the call may or may not have been applied
            else:
                if _absorb(resp, ents, results, rows, wprs):
                    return StepReply.from_proto(resp)  # nothing lost: the reply as it came
        for i, (s, toks, rb, left) in enumerate(ents):
            if results[i] is None:  # lost, or a closed session: redo alone
                r1 = s._step_proto(toks, rb, self._wpr, left)
                results[i], wprs[i], rows[i] = r1.results[0], r1.words_per_row, r1.masks
        return _merge(results, rows, wprs)


def step_resumable_async(entries: Iterable[ResumableEntry], words_per_row: int = 0) -> ResumableStepFuture:
    """Starts ``step_resumable`` and returns at once (the adapters overlap it with the
    forward pass); ``.result()`` finishes it."""
    return ResumableStepFuture(entries, words_per_row)


def step_resumable(entries: Iterable[ResumableEntry], words_per_row: int = 0) -> StepReply:
    """One Step for a batch of resumable sessions (all on one Client).

    When all is well this is one Step. Entries whose session is gone (NOT_FOUND), or all
    of them after a transport error, are resumed and redone one by one; the reply has one
    row per entry, in order. Other entry errors stay in ``reply.results`` and change
    nothing. Raises MaskdError (UNAVAILABLE) when the server does not come back.
    """
    return ResumableStepFuture(entries, words_per_row).result()


__all__ = ["ResumableSession", "ResumeOptions", "ResumableEntry", "ResumableStepFuture",
           "step_resumable", "step_resumable_async"]


def _absorb(resp: pb.StepResponse, ents: list, results: list, rows: list, wprs: list) -> bool:
    """Takes a batch Step reply into results/rows/wprs (index i for ents[i]): commits the
    steps the server confirmed and abandons the sessions it lost (NOT_FOUND), leaving their
    slots None to be redone. True when every entry came back."""
    w = resp.words_per_row
    masks = resp.masks  # each read of a bytes field copies it
    for i, (s, toks, rb, _) in enumerate(ents):
        r = resp.results[i]
        if r.status.code == _NOT_FOUND:
            s.session_id = 0
            continue
        if r.status.code == 0:
            s._commit(rb, toks)
        results[i], wprs[i] = r, w
        rows[i] = masks[i * w * 4:(i + 1) * w * 4]
    return all(r is not None for r in results)


def _merge(results: list, rows: list, wprs: list) -> StepReply:
    """One reply from per-entry results and rows of possibly different widths."""
    w = max(wprs)
    out = pb.StepResponse(words_per_row=w)
    out.results.extend(results)
    out.masks = b"".join(row.ljust(w * 4, b"\0") for row in rows)
    return StepReply.from_proto(out)
