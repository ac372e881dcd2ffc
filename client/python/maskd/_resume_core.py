"""The recovery rules of resumable sessions, free of I/O (``maskd.resume`` describes them).

Each rule is a generator function: it yields the operations it needs, a ``Call`` (one
unary RPC) or a ``Sleep``, and receives each call's reply by ``send`` or its failure, as a
``MaskdError``, by ``throw``. ``maskd.resume`` drives the generators with blocking calls
and ``maskd.aio_resume`` with awaits, so both make the same calls in the same order and
change a session's state at the same points.

Invariants the rules keep:
  * ``SessionCore._tokens`` changes only when the server confirmed a step or rollback.
  * A session whose last call's outcome is unknown is abandoned (``session_id`` 0) and
    never stepped again; its next call re-creates it and replays ``_tokens``. Unknown: a
    transport error (the call is then retried), DEADLINE_EXCEEDED or CANCELLED outside
    recovery (raised to the caller), and a call the driver dropped (an exception other
    than MaskdError, e.g. KeyboardInterrupt or asyncio cancellation, or the generator
    closed while the call was out: raised to the caller).
"""
from __future__ import annotations

import dataclasses
import time
from typing import (Any, Callable, Dict, Generator, Iterable, List, Optional, Sequence, Tuple,
                    TypeVar, Union, cast)

import grpc
import numpy as np
from grpc_health.v1 import health_pb2 as health_pb

from maskd._common import MaskdError, StepReply, serving_status_name
from maskd.v1 import maskd_pb2 as pb

T = TypeVar("T")

_NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
# Close codes that mean the server session is gone already (not an error for close).
_GONE = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
# Codes of a call that ended on the client's side: the server may have applied it.
_OUTCOME_UNKNOWN = (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


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


@dataclasses.dataclass(frozen=True)
class Call:
    """One unary RPC: ``method`` of the Maskd service (a name of the client's ``stub``), or
    "Health": grpc.health.v1 Check (the client's ``health_check``).

    ``deadline``: time.monotonic() seconds the call must end by (None: only the client's
    timeout). ``recovering``: the call waits for the channel to reconnect (wait_for_ready)
    instead of failing at once.
    """

    method: str
    request: Any
    deadline: Optional[float] = None
    recovering: bool = False

    def stub_method(self, client: Any) -> Any:
        """The multi-callable of ``client`` (a Client or an AsyncClient) that makes this call."""
        return client.health_check if self.method == "Health" else getattr(client.stub, self.method)

    def options(self, client_timeout: Optional[float]) -> Dict[str, Any]:
        """The call's keyword arguments: timeout (seconds, None: none) and wait_for_ready."""
        t = client_timeout
        if self.deadline is not None:
            left = max(0.0, self.deadline - time.monotonic())
            t = left if t is None else min(t, left)
        return {"timeout": t, "wait_for_ready": self.recovering or None}


@dataclasses.dataclass(frozen=True)
class Sleep:
    """A pause of ``seconds`` between recovery attempts."""

    seconds: float


Op = Union[Call, Sleep]
# A rule in progress: yields operations, receives their replies, returns a T.
Ops = Generator[Op, Any, T]


class _Lost(Exception):
    """An attempt found the session gone (``wait``: back off before the next one)."""

    def __init__(self, err: MaskdError, wait: bool):
        self.err, self.wait = err, wait


def transport_loss(code: grpc.StatusCode, recovering: bool) -> bool:
    """Whether a call failing with ``code`` lost the server (unreachable; while recovering,
    also not back by the deadline): the session is resumed and the call redone."""
    return code == grpc.StatusCode.UNAVAILABLE or (
        recovering and code == grpc.StatusCode.DEADLINE_EXCEEDED)


def _nothing(deadline: Optional[float], recovering: bool) -> Ops[None]:
    return None
    yield  # a generator that yields nothing


class SessionCore:
    """The state of one resumable session and the rules that change it.

    ``session_id``: the live server session (0: none, lost or not created yet);
    ``index_id`` / ``words_per_row``: of the live session; ``resumes``: times re-created
    after the first; ``_tokens``: the tokens the server confirmed, in order.
    """

    def __init__(self, client: Any, compile: pb.CompileRequest, options: ResumeOptions,
                 tokens: Sequence[int]):
        self.client = client
        self.compile = pb.CompileRequest()
        self.compile.CopyFrom(compile)
        self.options = options
        self.session_id = 0
        self.index_id = ""
        self.words_per_row = 0
        self.resumes = 0
        self._tokens: List[int] = [int(t) for t in tokens]
        self._closed = False

    @property
    def tokens(self) -> Tuple[int, ...]:
        """The tokens the server confirmed, in order."""
        return tuple(self._tokens)

    # -- recovery -------------------------------------------------------------
    def _with_recovery(self, what: str,
                       attempt: Callable[[Optional[float], bool], Ops[T]]) -> Ops[T]:
        """Runs ``attempt(deadline, recovering)`` on a live session, re-creating it first when
        there is none and again each time the attempt raises _Lost, within the options'
        bounds (past them: MaskdError UNAVAILABLE "<what>: maskd did not come back ...")."""
        self._check_open(what)
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
                    yield from self._recreate(deadline)
                except MaskdError as e:
                    if e.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        raise
                    last, wait = str(e), True
            if self.session_id != 0:
                try:
                    return (yield from attempt(deadline, recovering))
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
                yield Sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, o.max_backoff)
        raise MaskdError(grpc.StatusCode.UNAVAILABLE,
                         f"{what}: maskd did not come back ({attempts} attempts in "
                         f"{time.monotonic() - start:.3f} s): {last}")

    def _recreate(self, deadline: float) -> Ops[None]:
        # A restarted maskd accepts connections before its tokenizers are loaded
        # (NOT_SERVING; CreateSession would say "unknown tokenizer"): wait for SERVING.
        h = yield Call("Health", health_pb.HealthCheckRequest(), deadline, True)
        if h.status != health_pb.HealthCheckResponse.SERVING:
            raise MaskdError(grpc.StatusCode.UNAVAILABLE, f"maskd is {serving_status_name(h.status)}")
        created = yield Call("CreateSession", pb.CreateSessionRequest(compile=self.compile),
                             deadline, True)
        sid = created.session_id
        chunk = max(1, self.options.replay_chunk_tokens)
        for at in range(0, len(self._tokens), chunk):
            req = pb.StepRequest()
            req.entries.add(session_id=sid).tokens.extend(self._tokens[at:at + chunk])
            r = (yield Call("Step", req, deadline, True)).results[0].status
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

    def _rpc(self, call: Call) -> Ops[Any]:
        """``call`` on the live session: NOT_FOUND or a transport error raise _Lost; a call
        whose outcome is unknown otherwise abandons the session and raises."""
        try:
            return (yield call)
        except MaskdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                raise _Lost(e, wait=False) from None
            if transport_loss(e.code, call.recovering):
                raise _Lost(e, wait=True) from None
            if e.code in _OUTCOME_UNKNOWN:
                self.session_id = 0
            raise
        except BaseException:  # dropped by the driver
            self.session_id = 0
            raise

    def _commit(self, rollback: int, tokens: Sequence[int]) -> None:
        if rollback:
            del self._tokens[max(0, len(self._tokens) - rollback):]
        self._tokens.extend(int(t) for t in tokens)

    # -- calls ----------------------------------------------------------------
    def _create_ops(self) -> Ops[None]:
        """Creates the session (``session_id`` 0: the recovery loop creates it, retrying
        while the server is unreachable)."""
        return self._with_recovery("CreateSession", _nothing)

    def _step_ops(self, tokens: Sequence[int], rollback: int, words_per_row: int,
                  max_tokens_left: int) -> Ops[pb.StepResponse]:
        toks = [int(t) for t in tokens]

        def attempt(deadline: Optional[float], recovering: bool) -> Ops[pb.StepResponse]:
            req = pb.StepRequest(words_per_row=words_per_row)
            req.entries.add(session_id=self.session_id, rollback=rollback,
                            max_tokens_left=max_tokens_left).tokens.extend(toks)
            resp: pb.StepResponse = yield from self._rpc(Call("Step", req, deadline, recovering))
            st = resp.results[0].status
            if st.code == _NOT_FOUND:
                raise _Lost(MaskdError(grpc.StatusCode.NOT_FOUND, st.message), wait=False)
            if st.code == 0:
                self._commit(rollback, toks)
            return resp

        return self._with_recovery("Step", attempt)

    def _rollback_ops(self, n: int) -> Ops[int]:
        if n > len(self._tokens):
            raise MaskdError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"rollback of {n} tokens past the start ({len(self._tokens)} accepted)")

        def attempt(deadline: Optional[float], recovering: bool) -> Ops[int]:
            yield from self._rpc(Call("Rollback", pb.RollbackRequest(
                session_id=self.session_id, num_tokens=n), deadline, recovering))
            self._commit(n, ())
            return len(self._tokens)

        return self._with_recovery("Rollback", attempt)

    def _check_open(self, what: str) -> None:
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, f"{what}: session closed")

    def _close_ops(self) -> Ops[None]:
        """Closes the server session (one already gone is not an error)."""
        if self._closed:
            return
        self._closed = True
        sid, self.session_id = self.session_id, 0
        if sid:
            try:
                yield Call("CloseSession", pb.CloseSessionRequest(session_id=sid))
            except MaskdError as e:
                if e.code not in _GONE:
                    raise


# -- batches ----------------------------------------------------------------
# One normalized batch entry: (session, tokens, rollback, max_tokens_left).
BatchEntry = Tuple[Any, List[int], int, int]


def batch_entries(entries: Iterable[Tuple[Any, ...]], what: str, client_kind: str) -> List[BatchEntry]:
    """(session, tokens[, rollback[, max_tokens_left]]) tuples, normalized; raises
    ValueError "<what>: every session must use the same <client_kind>" when they mix clients."""
    ents = [(e[0], [int(t) for t in e[1]], int(e[2]) if len(e) > 2 else 0,
             int(e[3]) if len(e) > 3 else 0) for e in entries]
    if ents and any(s.client is not ents[0][0].client for s, *_ in ents):
        raise ValueError(f"{what}: every session must use the same {client_kind}")
    return ents


def batch_live(ents: Sequence[BatchEntry]) -> bool:
    """Whether the batch goes out as one Step (every session live and open)."""
    return bool(ents) and all(s.session_id != 0 and not s._closed for s, *_ in ents)


def step_batch(ents: Sequence[BatchEntry], words_per_row: int) -> Ops[StepReply]:
    """One Step for the batch when every session is live; then entries whose session is
    gone (NOT_FOUND), or all of them after a transport error, are redone one by one with
    recovery. The reply has one row per entry, in order; a reply with nothing lost is
    returned as it came."""
    if not ents:
        return StepReply([], np.zeros((0, 0), np.uint32), 0)
    results: List[Optional[pb.StepResult]] = [None] * len(ents)
    rows: List[bytes] = [b""] * len(ents)
    wprs: List[int] = [0] * len(ents)
    if batch_live(ents):
        req = pb.StepRequest(words_per_row=words_per_row)
        for s, toks, rb, left in ents:
            req.entries.add(session_id=s.session_id, rollback=rb,
                            max_tokens_left=left).tokens.extend(toks)
        try:
            resp = yield Call("Step", req)
        except MaskdError as err:
            unknown = err.code in _OUTCOME_UNKNOWN
            if not (unknown or transport_loss(err.code, False)):
                raise
            for s, *_ in ents:
                s.session_id = 0  # abandoned: the call may or may not have been applied
            if unknown:
                raise  # the caller's deadline or cancellation: not redone
        except BaseException:  # dropped by the driver
            for s, *_ in ents:
                s.session_id = 0
            raise
        else:
            if _absorb(resp, ents, results, rows, wprs):
                return StepReply.from_proto(resp)  # nothing lost: the reply as it came
    for i, (s, toks, rb, left) in enumerate(ents):
        if results[i] is None:  # lost, or a closed session: redo alone
            r1 = yield from s._step_ops(toks, rb, words_per_row, left)
            results[i], wprs[i], rows[i] = r1.results[0], r1.words_per_row, r1.masks
    return _merge(cast(List[pb.StepResult], results), rows, wprs)  # every slot filled above


def _absorb(resp: pb.StepResponse, ents: Sequence[BatchEntry],
            results: List[Optional[pb.StepResult]], rows: List[bytes], wprs: List[int]) -> bool:
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


def _merge(results: Sequence[pb.StepResult], rows: Sequence[bytes],
           wprs: Sequence[int]) -> StepReply:
    """One reply from per-entry results and rows of possibly different widths."""
    w = max(wprs)
    out = pb.StepResponse(words_per_row=w)
    out.results.extend(results)
    out.masks = b"".join(row.ljust(w * 4, b"\0") for row in rows)
    return StepReply.from_proto(out)
