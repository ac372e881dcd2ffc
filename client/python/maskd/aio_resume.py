"""maskd.ResumableSession on asyncio (``maskd.aio.AsyncClient``): the same rules as
``maskd.resume`` (re-create, replay the confirmed tokens, redo the call; bounded by
``ResumeOptions``), with awaitable calls.

    s = await AsyncResumableSession.create(aclient, "qwen3", regex="[a-z]+")
    reply = await s.step()
    reply = await async_step_resumable([(s, [token])])
"""
from __future__ import annotations

import asyncio
import time
from typing import Awaitable, Callable, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

import grpc
import numpy as np

from maskd import _health_pb2 as health_pb
from maskd._common import MaskdError, StepReply, compile_request
from maskd.aio import AsyncClient
from maskd.client import _HEALTH_STATUS
from maskd.resume import _NOT_FOUND, ResumeOptions, _Lost, _absorb, _merge, _transport_loss
from maskd.v1 import maskd_pb2 as pb

T = TypeVar("T")


class AsyncResumableSession:
    """The asyncio twin of ``maskd.ResumableSession`` (build it with ``await create(...)``
    or ``await AsyncResumableSession.from_compile(client, compile_request)``)."""

    def __init__(self, client: AsyncClient, compile: pb.CompileRequest,
                 options: ResumeOptions = ResumeOptions(), tokens: Sequence[int] = ()):
        """Not connected yet: use ``from_compile`` / ``create``."""
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

    @classmethod
    async def from_compile(cls, client: AsyncClient, compile: pb.CompileRequest,
                           options: ResumeOptions = ResumeOptions(),
                           tokens: Sequence[int] = ()) -> "AsyncResumableSession":
        s = cls(client, compile, options, tokens)
        try:
            await s._with_recovery("CreateSession", lambda d, r: asyncio.sleep(0))
        except BaseException:
            s._closed = True
            raise
        return s

    @classmethod
    async def create(cls, client: AsyncClient, tokenizer: str, *, regex: Optional[str] = None,
                     json_schema: Union[str, dict, None] = None, eager: bool = False,
                     options: ResumeOptions = ResumeOptions()) -> "AsyncResumableSession":
        return await cls.from_compile(client, compile_request(
            tokenizer, regex=regex, json_schema=json_schema, eager=eager), options)

    @property
    def tokens(self) -> Tuple[int, ...]:
        return tuple(self._tokens)

    def _timeout(self, deadline: Optional[float]) -> Optional[float]:
        t = self.client.timeout
        if deadline is not None:
            left = max(0.0, deadline - time.monotonic())
            t = left if t is None else min(t, left)
        return t

    async def _call(self, fn, req, deadline: Optional[float], recovering: bool):
        try:
            return await fn(req, timeout=self._timeout(deadline), wait_for_ready=recovering or None)
        except grpc.RpcError as e:
            raise MaskdError.from_rpc(e) from None

    async def _rpc(self, fn, req, deadline: Optional[float], recovering: bool):
        try:
            return await self._call(fn, req, deadline, recovering)
        except MaskdError as e:
            if e.code == grpc.StatusCode.NOT_FOUND:
                raise _Lost(e, wait=False) from None
            if _transport_loss(e.code, recovering):
                raise _Lost(e, wait=True) from None
            raise

    async def _with_recovery(self, what: str,
                             attempt: Callable[[Optional[float], bool], Awaitable[T]]) -> T:
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, f"{what}: session closed")
        o = self.options
        start = time.monotonic()
        deadline: Optional[float] = None
        backoff, last, attempts, recovering = o.initial_backoff, "", 0, False
        while attempts < o.max_attempts:
            attempts += 1
            wait = False
            if self.session_id == 0:
                recovering = True
                if deadline is None:
                    deadline = start + o.recovery_timeout
                try:
                    await self._recreate(deadline)
                except MaskdError as e:
                    if e.code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                        raise
                    last, wait = str(e), True
            if self.session_id != 0:
                try:
                    return await attempt(deadline, recovering)
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
                await asyncio.sleep(min(backoff, deadline - now))
                backoff = min(backoff * 2, o.max_backoff)
        raise MaskdError(grpc.StatusCode.UNAVAILABLE,
                         f"{what}: maskd did not come back ({attempts} attempts in "
                         f"{time.monotonic() - start:.3f} s): {last}")

    async def _recreate(self, deadline: float) -> None:
        h = await self._call(self.client._health, health_pb.HealthCheckRequest(), deadline, True)
        if h.status != health_pb.HealthCheckResponse.SERVING:
            raise MaskdError(grpc.StatusCode.UNAVAILABLE,
                             f"maskd is {_HEALTH_STATUS.get(h.status, h.status)}")
        stub = self.client._stub
        created = await self._call(stub.CreateSession, pb.CreateSessionRequest(compile=self.compile),
                                   deadline, True)
        sid = created.session_id
        chunk = max(1, self.options.replay_chunk_tokens)
        for at in range(0, len(self._tokens), chunk):
            req = pb.StepRequest()
            req.entries.add(session_id=sid).tokens.extend(self._tokens[at:at + chunk])
            r = (await self._call(stub.Step, req, deadline, True)).results[0].status
            if r.code == _NOT_FOUND:
                raise MaskdError(grpc.StatusCode.UNAVAILABLE, "session lost during replay")
            if r.code != 0:
                raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"resume: the server refused the replayed tokens from {at} "
                                 f"(tokenizer changed?): {r.message}")
        first = self.index_id == ""
        self.session_id, self.index_id, self.words_per_row = sid, created.index_id, created.words_per_row
        if not first:
            self.resumes += 1

    def _commit(self, rollback: int, tokens: Sequence[int]) -> None:
        if rollback:
            del self._tokens[max(0, len(self._tokens) - rollback):]
        self._tokens.extend(int(t) for t in tokens)

    async def _step_proto(self, tokens: Sequence[int], rollback: int = 0, words_per_row: int = 0,
                          max_tokens_left: int = 0) -> pb.StepResponse:
        toks = [int(t) for t in tokens]

        async def attempt(deadline: Optional[float], recovering: bool) -> pb.StepResponse:
            req = pb.StepRequest(words_per_row=words_per_row)
            req.entries.add(session_id=self.session_id, rollback=rollback,
                            max_tokens_left=max_tokens_left).tokens.extend(toks)
            resp = await self._rpc(self.client._stub.Step, req, deadline, recovering)
            st = resp.results[0].status
            if st.code == _NOT_FOUND:
                raise _Lost(MaskdError(grpc.StatusCode.NOT_FOUND, st.message), wait=False)
            if st.code == 0:
                self._commit(rollback, toks)
            return resp

        return await self._with_recovery("Step", attempt)

    async def step(self, tokens: Sequence[int] = (), rollback: int = 0, words_per_row: int = 0,
                   max_tokens_left: int = 0) -> StepReply:
        """As ``ResumableSession.step``."""
        return StepReply.from_proto(await self._step_proto(tokens, rollback, words_per_row,
                                                           max_tokens_left))

    async def rollback(self, n: int) -> int:
        """Undoes the last ``n`` confirmed tokens; returns the tokens left."""
        if n > len(self._tokens):
            raise MaskdError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"rollback of {n} tokens past the start ({len(self._tokens)} accepted)")

        async def attempt(deadline: Optional[float], recovering: bool) -> int:
            await self._rpc(self.client._stub.Rollback,
                            pb.RollbackRequest(session_id=self.session_id, num_tokens=n),
                            deadline, recovering)
            self._commit(n, ())
            return len(self._tokens)

        return await self._with_recovery("Rollback", attempt)

    async def fork(self) -> "AsyncResumableSession":
        """A new resumable session in the same state (its own copy of the tokens)."""
        if self._closed:
            raise MaskdError(grpc.StatusCode.FAILED_PRECONDITION, "Fork: session closed")
        return await AsyncResumableSession.from_compile(self.client, self.compile, self.options,
                                                        self._tokens)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        sid, self.session_id = self.session_id, 0
        if sid:
            try:
                await self.client.close_session(sid)
            except MaskdError as e:
                if e.code not in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.UNAVAILABLE,
                                  grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise


AsyncResumableEntry = Union[Tuple[AsyncResumableSession, Sequence[int]],
                            Tuple[AsyncResumableSession, Sequence[int], int],
                            Tuple[AsyncResumableSession, Sequence[int], int, int]]


async def async_step_resumable(entries: Iterable[AsyncResumableEntry],
                               words_per_row: int = 0) -> StepReply:
    """As ``maskd.step_resumable``: one Step when all is well, lost entries resumed and
    redone one by one."""
    ents = [(e[0], [int(t) for t in e[1]], int(e[2]) if len(e) > 2 else 0,
             int(e[3]) if len(e) > 3 else 0) for e in entries]
    if not ents:
        return StepReply([], np.zeros((0, 0), np.uint32), 0)
    client = ents[0][0].client
    if any(s.client is not client for s, *_ in ents):
        raise ValueError("async_step_resumable: every session must use the same AsyncClient")
    results: List[Optional[pb.StepResult]] = [None] * len(ents)
    rows: List[bytes] = [b""] * len(ents)
    wprs: List[int] = [0] * len(ents)
    if all(s.session_id != 0 and not s._closed for s, *_ in ents):
        req = pb.StepRequest(words_per_row=words_per_row)
        for s, toks, rb, left in ents:
            req.entries.add(session_id=s.session_id, rollback=rb, max_tokens_left=left).tokens.extend(toks)
        try:
            resp = await client._stub.Step(req, timeout=client.timeout)
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
        if results[i] is None:
            r1 = await s._step_proto(toks, rb, words_per_row, left)
            results[i], wprs[i], rows[i] = r1.results[0], r1.words_per_row, r1.masks
    return _merge(results, rows, wprs)


__all__ = ["AsyncResumableSession", "AsyncResumableEntry", "async_step_resumable"]
