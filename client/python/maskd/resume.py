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
a step or rollback; after a call whose outcome is unknown (a transport error; a
DEADLINE_EXCEEDED, a KeyboardInterrupt, a cancelled future) the old session is abandoned
(never stepped again: the call may or may not have been applied). When the server does not come
back within ``recovery_timeout`` / ``max_attempts`` a call raises
``MaskdError(UNAVAILABLE, "...: maskd did not come back (N attempts in T s): ...")`` and
changes nothing. One decoding loop owns a session (not thread-safe); the Client under it
is shared. The rules live in ``maskd._resume_core`` (free of I/O); this module drives them
with blocking calls, ``maskd.aio_resume`` with awaits.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Optional, Sequence, Tuple, TypeVar, Union

import grpc

from maskd._common import GrammarLike, JsonLike, MaskdError, StepReply, compile_request
from maskd._resume_core import (Call, Op, Ops, ResumeOptions, SessionCore, Sleep,
                                batch_entries, batch_live, step_batch)
from maskd.client import Client
from maskd.v1 import maskd_pb2 as pb

T = TypeVar("T")


def _perform(client: Optional[Client], op: Op) -> Any:
    """Does ``op`` with a blocking call; a failed RPC raises MaskdError."""
    if isinstance(op, Sleep):
        time.sleep(op.seconds)
        return None
    assert client is not None
    try:
        return op.stub_method(client)(op.request, **op.options(client.timeout))
    except grpc.RpcError as e:
        raise MaskdError.from_rpc(e) from None


def _run(client: Optional[Client], ops: Ops[T], reply: Any = None,
         error: Optional[MaskdError] = None) -> T:
    """Drives ``ops`` to its result (``client`` None: an empty batch, which makes no call).
    ``reply`` / ``error``: the outcome of the operation it yielded last, when that one was
    done elsewhere (a future). Anything but a MaskdError (KeyboardInterrupt, ...) closes
    ``ops`` at the call it interrupted."""
    try:
        while True:
            try:
                op = ops.send(reply) if error is None else ops.throw(error)
            except StopIteration as done:
                result: T = done.value
                return result
            reply, error = None, None
            try:
                reply = _perform(client, op)
            except MaskdError as e:
                error = e
    finally:
        ops.close()


class ResumableSession(SessionCore):
    """A maskd session that is re-created and replayed when the server loses it.

    Build it with ``create`` (or from a ``CompileRequest``). ``tokens`` are the tokens
    the server confirmed, ``session_id`` the live server id (changes on each resume),
    ``resumes`` how many times it was resumed.
    """

    def __init__(self, client: Client, compile: pb.CompileRequest,
                 options: ResumeOptions = ResumeOptions(), *, _tokens: Sequence[int] = ()):
        super().__init__(client, compile, options, _tokens)
        try:
            _run(client, self._create_ops())
        except BaseException:
            self._closed = True
            raise

    @classmethod
    def create(cls, client: Client, tokenizer: str, *, regex: Optional[str] = None,
               json_schema: Optional[JsonLike] = None,
               grammar: Optional[GrammarLike] = None,
               structural_tag: Optional[JsonLike] = None, eager: bool = False,
               options: ResumeOptions = ResumeOptions()) -> "ResumableSession":
        """A session at the start of one constraint (as ``Client.compile``) for ``tokenizer``."""
        return cls(client, compile_request(tokenizer, regex=regex, json_schema=json_schema,
                                           grammar=grammar, structural_tag=structural_tag,
                                           eager=eager), options)

    def _step_proto(self, tokens: Sequence[int], rollback: int = 0, words_per_row: int = 0,
                    max_tokens_left: int = 0) -> pb.StepResponse:
        return _run(self.client, self._step_ops(tokens, rollback, words_per_row, max_tokens_left))

    def step(self, tokens: Sequence[int] = (), rollback: int = 0, words_per_row: int = 0,
             max_tokens_left: int = 0) -> StepReply:
        """One Step of this session: ``tokens`` accepted since the previous step (after
        undoing ``rollback``). An entry error (FAILED_PRECONDITION for a token not allowed,
        ...) is in ``reply.results[0]`` and changes nothing; raises MaskdError
        (UNAVAILABLE) when the server does not come back."""
        return StepReply.from_proto(self._step_proto(tokens, rollback, words_per_row, max_tokens_left))

    def rollback(self, n: int) -> int:
        """Undoes the last ``n`` confirmed tokens; returns the tokens left."""
        return _run(self.client, self._rollback_ops(n))

    def fork(self) -> "ResumableSession":
        """A new resumable session in the same state, with its own copy of the tokens
        (created at the constraint and replayed: it works on a restarted server too)."""
        self._check_open("Fork")
        return ResumableSession(self.client, self.compile, self.options, _tokens=self._tokens)

    def close(self) -> None:
        """Closes the server session (one already gone is not an error)."""
        _run(self.client, self._close_ops())

    def __enter__(self) -> "ResumableSession":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# One batch entry: (session, tokens[, rollback[, max_tokens_left]]).
ResumableEntry = Union[Tuple[ResumableSession, Sequence[int]],
                       Tuple[ResumableSession, Sequence[int], int],
                       Tuple[ResumableSession, Sequence[int], int, int]]


class ResumableStepFuture:
    """A batch Step in flight (``step_resumable_async``); ``result()`` finishes it, resuming
    lost sessions as ``step_resumable`` does."""

    def __init__(self, entries: Iterable[ResumableEntry], words_per_row: int = 0):
        self._ents = batch_entries(entries, "step_resumable", "Client")
        self._client: Optional[Client] = self._ents[0][0].client if self._ents else None
        self._wpr = words_per_row
        self._ops: Optional[Ops[StepReply]] = None  # waits for the reply of _fut
        self._fut: Optional[grpc.Future[pb.StepResponse]] = None
        if batch_live(self._ents):
            client: Client = self._ents[0][0].client
            self._ops = step_batch(self._ents, words_per_row)
            call = next(self._ops)  # the batch Step
            assert isinstance(call, Call)
            self._fut = call.stub_method(client).future(call.request, **call.options(client.timeout))

    def cancel(self) -> None:
        """Drops the call. Its sessions are abandoned (the server may have applied it) and
        resumed by their next call."""
        if self._fut is not None:
            self._fut.cancel()
            self._fut = None
            ops, self._ops = self._ops, None
            if ops is not None:
                ops.close()  # a dropped call: abandons the batch's sessions

    def result(self) -> StepReply:
        """The reply: one row per entry, in order (raises MaskdError UNAVAILABLE when the
        server does not come back)."""
        fut, self._fut = self._fut, None
        ops, self._ops = self._ops, None
        if fut is None or ops is None:  # not sent (a session lost or closed), or cancelled
            return _run(self._client, step_batch(self._ents, self._wpr))
        reply, error = None, None
        try:
            reply = fut.result()
        except grpc.RpcError as e:
            error = MaskdError.from_rpc(e)
        except BaseException:
            ops.close()
            raise
        return _run(self._client, ops, reply, error)


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
