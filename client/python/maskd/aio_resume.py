"""maskd.ResumableSession on asyncio (``maskd.aio.AsyncClient``): the same rules as
``maskd.resume`` (re-create, replay the confirmed tokens, redo the call; bounded by
``ResumeOptions``), with awaitable calls.

    s = await AsyncResumableSession.create(aclient, "qwen3", regex="[a-z]+")
    reply = await s.step()
    reply = await async_step_resumable([(s, [token])])
"""
from __future__ import annotations

import asyncio
from typing import Any, Iterable, Optional, Sequence, Tuple, TypeVar, Union

import grpc

from maskd._common import GrammarLike, JsonLike, MaskdError, StepReply, compile_request
from maskd._resume_core import (Op, Ops, ResumeOptions, SessionCore, Sleep, batch_entries,
                                step_batch)
from maskd.aio import AsyncClient
from maskd.v1 import maskd_pb2 as pb

T = TypeVar("T")


async def _perform(client: Optional[AsyncClient], op: Op) -> Any:
    """Does ``op`` with an awaited call; a failed RPC raises MaskdError."""
    if isinstance(op, Sleep):
        await asyncio.sleep(op.seconds)
        return None
    assert client is not None
    try:
        return await op.stub_method(client)(op.request, **op.options(client.timeout))
    except grpc.RpcError as e:
        raise MaskdError.from_rpc(e) from None


async def _run(client: Optional[AsyncClient], ops: Ops[T]) -> T:
    """Drives ``ops`` to its result (``client`` None: an empty batch, which makes no call).
    Anything but a MaskdError (asyncio.CancelledError, ...) closes ``ops`` at the call it
    interrupted."""
    reply: Any = None
    error: Optional[MaskdError] = None
    try:
        while True:
            try:
                op = ops.send(reply) if error is None else ops.throw(error)
            except StopIteration as done:
                result: T = done.value
                return result
            reply, error = None, None
            try:
                reply = await _perform(client, op)
            except MaskdError as e:
                error = e
    finally:
        ops.close()


class AsyncResumableSession(SessionCore):
    """The asyncio twin of ``maskd.ResumableSession`` (build it with ``await create(...)``
    or ``await AsyncResumableSession.from_compile(client, compile_request)``)."""

    def __init__(self, client: AsyncClient, compile: pb.CompileRequest,
                 options: ResumeOptions = ResumeOptions(), tokens: Sequence[int] = ()):
        """Not connected yet: use ``from_compile`` / ``create``."""
        super().__init__(client, compile, options, tokens)

    @classmethod
    async def from_compile(cls, client: AsyncClient, compile: pb.CompileRequest,
                           options: ResumeOptions = ResumeOptions(),
                           tokens: Sequence[int] = ()) -> "AsyncResumableSession":
        s = cls(client, compile, options, tokens)
        try:
            await _run(client, s._create_ops())
        except BaseException:
            s._closed = True
            raise
        return s

    @classmethod
    async def create(cls, client: AsyncClient, tokenizer: str, *, regex: Optional[str] = None,
                     json_schema: Optional[JsonLike] = None,
                     grammar: Optional[GrammarLike] = None,
                     structural_tag: Optional[JsonLike] = None, eager: bool = False,
                     options: ResumeOptions = ResumeOptions()) -> "AsyncResumableSession":
        return await cls.from_compile(client, compile_request(
            tokenizer, regex=regex, json_schema=json_schema, grammar=grammar,
            structural_tag=structural_tag, eager=eager), options)

    async def _step_proto(self, tokens: Sequence[int], rollback: int = 0, words_per_row: int = 0,
                          max_tokens_left: int = 0) -> pb.StepResponse:
        return await _run(self.client, self._step_ops(tokens, rollback, words_per_row,
                                                      max_tokens_left))

    async def step(self, tokens: Sequence[int] = (), rollback: int = 0, words_per_row: int = 0,
                   max_tokens_left: int = 0) -> StepReply:
        """As ``ResumableSession.step``."""
        return StepReply.from_proto(await self._step_proto(tokens, rollback, words_per_row,
                                                           max_tokens_left))

    async def rollback(self, n: int) -> int:
        """Undoes the last ``n`` confirmed tokens; returns the tokens left."""
        return await _run(self.client, self._rollback_ops(n))

    async def fork(self) -> "AsyncResumableSession":
        """A new resumable session in the same state (its own copy of the tokens)."""
        self._check_open("Fork")
        return await AsyncResumableSession.from_compile(self.client, self.compile, self.options,
                                                        self._tokens)

    async def close(self) -> None:
        await _run(self.client, self._close_ops())


AsyncResumableEntry = Union[Tuple[AsyncResumableSession, Sequence[int]],
                            Tuple[AsyncResumableSession, Sequence[int], int],
                            Tuple[AsyncResumableSession, Sequence[int], int, int]]


async def async_step_resumable(entries: Iterable[AsyncResumableEntry],
                               words_per_row: int = 0) -> StepReply:
    """As ``maskd.step_resumable``: one Step when all is well, lost entries resumed and
    redone one by one."""
    ents = batch_entries(entries, "async_step_resumable", "AsyncClient")
    return await _run(ents[0][0].client if ents else None, step_batch(ents, words_per_row))


__all__ = ["AsyncResumableSession", "AsyncResumableEntry", "async_step_resumable"]
